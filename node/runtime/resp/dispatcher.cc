#include "node/runtime/resp/dispatcher.h"

#include <cassert>

#include "absl/strings/str_cat.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

// "ERR unknown command 'x', with args beginning with: 'a' 'b' " (Redis' form;
// at most 128 bytes of the name and of the arguments).
void ReplyUnknown(std::span<const std::string_view> args, std::string* out) {
  std::string msg = Cat("ERR unknown command '", args[0].substr(0, 128), "', with args beginning with: ");
  size_t budget = 128;
  for (size_t i = 1; i < args.size() && budget > 0; ++i) {
    const std::string_view a = args[i].substr(0, budget);
    CatAppend(&msg, "'", a, "' ");
    budget -= a.size();
  }
  AppendError(out, msg);
}

bool ArityOk(int arity, size_t argc) {
  return arity >= 0 ? argc == static_cast<size_t>(arity) : argc >= static_cast<size_t>(-arity);
}

}  // namespace

void Dispatch(ServerContext& context, Session& session, std::span<const std::string_view> args, std::string* out) {
  assert(!args.empty());
  assert(context.node != nullptr);
  context.counters.commands_processed.fetch_add(1, std::memory_order_relaxed);
  const size_t before = out->size();
  const CommandSpec* spec = FindCommand(args[0]);
  if (spec == nullptr) {
    ReplyUnknown(args, out);
  } else if (!context.password.empty() && !session.authenticated && !spec->no_auth) {
    AppendError(out, "NOAUTH Authentication required.");
  } else if (!ArityOk(spec->arity, args.size())) {
    CommandCall call{context, session, args, out};
    ReplyWrongArity(call);
  } else {
    if (session.record != nullptr) session.record->set_last_command(spec->name.data());
    CommandCall call{context, session, args, out};
    spec->handler(call);
  }
  assert(out->size() > before);
  if (out->size() > before && (*out)[before] == '-') {
    context.counters.error_replies.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace pollen::resp
