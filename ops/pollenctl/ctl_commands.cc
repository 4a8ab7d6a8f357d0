#include "ops/pollenctl/ctl_commands.h"

#include <cstdio>
#include <iostream>
#include <iterator>

#include "ops/pollenctl/output.h"

namespace pollen::ctl {
namespace {

using resp::Reply;

// Reports an error reply; "ERR not found" maps to kExitNo.
int ReportError(const Reply& r, const std::string& command) {
  if (r.str == "ERR not found") {
    std::cerr << "pollenctl: not found\n";
    return kExitNo;
  }
  if (r.str.rfind("ERR unknown command", 0) == 0) {
    std::cerr << "pollenctl: this pollend does not support " << command << " (" << r.str << ")\n";
    return kExitError;
  }
  std::cerr << "pollenctl: server error: " << r.str << "\n";
  return kExitError;
}

// Calls the server; on transport failure prints and returns nullopt-like false.
bool Call(RespClient& c, const std::vector<std::string>& args, Reply* out, int* code) {
  absl::StatusOr<Reply> r = c.Call(args);
  if (!r.ok()) {
    std::cerr << "pollenctl: " << r.status().message() << "\n";
    *code = kExitError;
    return false;
  }
  if (r->is_error()) {
    *code = ReportError(*r, args[0]);
    return false;
  }
  *out = *std::move(r);
  return true;
}

int Status(RespClient& c, const Options& o) {
  Reply r;
  int code = 0;
  if (!Call(c, {"POLLEN.STATUS"}, &r, &code)) return code;
  if (o.json) {
    std::cout << FieldsToJson(r) << "\n";
  } else {
    for (const auto& [k, v] : Fields(r)) std::cout << k << ": " << v << "\n";
  }
  return kExitOk;
}

int Members(RespClient& c, const Options& o) {
  Reply r;
  int code = 0;
  if (!Call(c, {"POLLEN.MEMBERS"}, &r, &code)) return code;
  if (o.json) {
    std::string s = "[";
    for (size_t i = 0; i < r.elements.size(); ++i) s += (i ? "," : "") + FieldsToJson(r.elements[i]);
    std::cout << s << "]\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Reply& m : r.elements) {
    std::vector<std::string> row;
    for (const auto& [k, v] : Fields(m)) row.push_back(v);
    rows.push_back(row);
  }
  std::cout << Table({"NAME", "ADDRESS", "STATE", "INCARNATION"}, rows);
  return kExitOk;
}

int Filters(RespClient& c, const Options& o) {
  Reply r;
  int code = 0;
  if (!Call(c, {"POLLEN.FILTERS"}, &r, &code)) return code;
  if (o.json) {
    std::string s = "[";
    for (size_t i = 0; i < r.elements.size(); ++i) s += (i ? "," : "") + FieldsToJson(r.elements[i]);
    std::cout << s << "]\n";
    return kExitOk;
  }
  const std::vector<std::string> cols = {"name",       "scope",        "capacity",        "fpr",
                                         "epoch",      "live_generations", "layers",        "fill_ratio",
                                         "estimated_items", "memory_bytes", "observed_fpr"};
  std::vector<std::vector<std::string>> rows;
  for (const Reply& f : r.elements) {
    const auto fields = Fields(f);
    std::vector<std::string> row;
    for (const std::string& col : cols) {
      std::string v = "-";
      for (const auto& [k, val] : fields) {
        if (k == col) v = val;
      }
      if ((col == "fill_ratio" || col == "fpr" || col == "observed_fpr") && v != "-") {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.4g", std::strtod(v.c_str(), nullptr));
        v = buf;
      }
      row.push_back(v);
    }
    rows.push_back(row);
  }
  std::cout << Table({"NAME", "SCOPE", "CAPACITY", "FPR", "EPOCH", "GENS", "LAYERS", "FILL", "ITEMS", "BYTES", "OBSERVED FPR"},
                     rows);
  return kExitOk;
}

// add / exists: one BF.MADD / BF.MEXISTS; exists exits 1 when any key is absent.
int AddOrExists(RespClient& c, const Options& o, bool add) {
  const std::string& filter = o.args[1];
  std::vector<std::string> req = {add ? "BF.MADD" : "BF.MEXISTS", filter};
  req.insert(req.end(), o.args.begin() + 2, o.args.end());
  Reply r;
  int code = 0;
  if (!Call(c, req, &r, &code)) return code;
  if (r.type != Reply::Type::kArray || r.elements.size() != req.size() - 2) {
    std::cerr << "pollenctl: unexpected reply " << r.DebugString() << "\n";
    return kExitError;
  }
  bool all_yes = true;
  std::string json = "{\"filter\":" + JsonString(filter) + ",\"results\":[";
  for (size_t i = 0; i < r.elements.size(); ++i) {
    const bool yes = r.elements[i].integer == 1;
    all_yes = all_yes && yes;
    const std::string& key = req[i + 2];
    if (o.json) {
      json += (i ? "," : "") + std::string("{\"key\":") + JsonString(key) + (add ? ",\"added\":" : ",\"exists\":") +
              (yes ? "true" : "false") + "}";
    } else if (add) {
      std::cout << (yes ? "added    " : "present  ") << key << "\n";
    } else {
      std::cout << (yes ? "yes  " : "no   ") << key << "\n";
    }
  }
  if (o.json) std::cout << json << "]}\n";
  return add || all_yes ? kExitOk : kExitNo;
}

int Rotate(RespClient& c, const Options& o) {
  Reply r;
  int code = 0;
  if (!Call(c, {"POLLEN.ROTATE", o.args[1]}, &r, &code)) return code;
  std::cout << (o.json ? "{\"rotated\":" + JsonString(o.args[1]) + "}" : "rotated " + o.args[1]) << "\n";
  return kExitOk;
}

int FalsePositive(RespClient& c, const Options& o) {
  std::vector<std::string> req = {"POLLEN.FALSEPOSITIVE", o.args[1]};
  if (o.args.size() > 2) req.push_back(o.args[2]);
  Reply r;
  int code = 0;
  if (!Call(c, req, &r, &code)) return code;
  const std::string total = std::to_string(r.integer);
  std::cout << (o.json ? "{\"filter\":" + JsonString(o.args[1]) + ",\"false_positives\":" + total + "}"
                       : o.args[1] + ": " + total + " false positives reported on this node")
            << "\n";
  return kExitOk;
}

int WhoHas(RespClient& c, const Options& o) {
  Reply r;
  int code = 0;
  if (!Call(c, {"POLLEN.WHOHAS", o.args[1], o.args[2]}, &r, &code)) return code;
  if (o.json) {
    std::cout << ToJson(r) << "\n";
  } else {
    for (const Reply& e : r.elements) std::cout << e.str << "\n";
  }
  return r.elements.empty() ? kExitNo : kExitOk;
}

int Keyring(RespClient& c, const Options& o) {
  const std::string& sub = o.args[1];
  std::vector<std::string> req = {"POLLEN.KEYRING"};
  if (sub == "list") {
    req.push_back("LIST");
  } else if (sub == "install") {
    std::string key = o.args.size() > 2 ? o.args[2] : "-";
    if (key == "-") {  // from stdin, so the key does not show in `ps`
      key.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) key.pop_back();
    }
    req.insert(req.end(), {"INSTALL", key});
  } else {
    req.insert(req.end(), {sub == "use" ? "USE" : "REMOVE", o.args[2]});
  }
  Reply r;
  int code = 0;
  if (!Call(c, req, &r, &code)) return code;
  if (sub == "list") {
    if (o.json) {
      std::string s = "[";
      for (size_t i = 0; i < r.elements.size(); ++i) {
        s += (i ? "," : "") + std::string("{\"id\":") + JsonString(r.elements[i].str) +
             ",\"primary\":" + (i == 0 ? "true" : "false") + "}";
      }
      std::cout << s << "]\n";
    } else {
      for (size_t i = 0; i < r.elements.size(); ++i) {
        std::cout << r.elements[i].str << (i == 0 ? "  (primary)" : "") << "\n";
      }
    }
    return kExitOk;
  }
  std::cout << (o.json ? "{\"ok\":true}" : "OK") << "\n";
  return kExitOk;
}

int Snapshot(RespClient& c, const Options& o) {
  Reply r;
  int code = 0;
  if (!Call(c, {"POLLEN.SNAPSHOT"}, &r, &code)) return code;
  std::cout << (o.json ? "{\"snapshot\":" + JsonString(Text(r)) + "}" : Text(r)) << "\n";
  return kExitOk;
}

}  // namespace

bool CheckUsage(const std::vector<std::string>& a, std::string* why) {
  if (a.empty()) {
    *why = "missing command";
    return false;
  }
  const std::string& cmd = a[0];
  const size_t n = a.size() - 1;
  bool ok = false;
  if (cmd == "status" || cmd == "members" || cmd == "filters" || cmd == "snapshot") {
    ok = n == 0;
  } else if (cmd == "add" || cmd == "exists") {
    ok = n >= 2;
  } else if (cmd == "rotate") {
    ok = n == 1;
  } else if (cmd == "falsepositive") {
    ok = n == 1 || n == 2;
  } else if (cmd == "whohas") {
    ok = n == 2;
  } else if (cmd == "import") {
    ok = n == 1;
  } else if (cmd == "keyring") {
    ok = (n == 1 && (a[1] == "list" || a[1] == "install")) ||
         (n == 2 && (a[1] == "install" || a[1] == "use" || a[1] == "remove"));
  } else {
    *why = "unknown command '" + cmd + "'";
    return false;
  }
  if (!ok) *why = "wrong arguments for '" + cmd + "'";
  return ok;
}

int RunSubcommand(RespClient& client, const Options& o) {
  const std::string& cmd = o.args[0];
  if (cmd == "status") return Status(client, o);
  if (cmd == "members") return Members(client, o);
  if (cmd == "filters") return Filters(client, o);
  if (cmd == "add") return AddOrExists(client, o, true);
  if (cmd == "exists") return AddOrExists(client, o, false);
  if (cmd == "rotate") return Rotate(client, o);
  if (cmd == "whohas") return WhoHas(client, o);
  if (cmd == "falsepositive") return FalsePositive(client, o);
  if (cmd == "keyring") return Keyring(client, o);
  if (cmd == "snapshot") return Snapshot(client, o);
  if (cmd == "import") return RunImport(client, o);
  return kExitUsage;
}

}  // namespace pollen::ctl
