// Runs a libFuzzer-style target without libFuzzer: a deterministic, bounded
// stream of inputs (random bytes, then byte-level mutations of earlier inputs
// and of any seed files given on the command line). A crash, sanitizer report
// or assertion failure fails the ctest test; the seed and iteration are printed
// first so a failure can be replayed. Every seed file is run as given first, so
// the committed corpus (fuzz/corpus/<target>) and crash regressions
// (fuzz/regressions/<target>) replay on every ctest run.
//
//   <target> [--iterations N] [--seed S] [--max-len L] [--seed-dir DIR (may be missing)]...
//            [seed files or directories...]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  uint64_t iterations = 10000;
  uint64_t seed = 1;
  size_t max_len = 4096;
  std::vector<std::string> corpus;
  std::vector<std::string> corpus_names;  // printed before each seed runs, so a crash names its file
  auto add_files = [&](std::vector<std::string> files) {
    std::sort(files.begin(), files.end());  // a deterministic order for --seed replays
    for (const std::string& file : files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read seed file %s\n", file.c_str());
        std::exit(2);
      }
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      corpus_names.push_back(file);
    }
  };
  auto files_in = [](const std::string& dir) {
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.is_regular_file()) files.push_back(entry.path().string());
    }
    return files;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--iterations" && i + 1 < argc) {
      iterations = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--max-len" && i + 1 < argc) {
      max_len = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--seed-dir" && i + 1 < argc) {
      // Optional: a target may have no committed corpus or regressions yet.
      const std::string dir = argv[++i];
      if (std::filesystem::is_directory(dir)) add_files(files_in(dir));
    } else if (std::filesystem::is_directory(arg)) {
      add_files(files_in(arg));
    } else {
      add_files({arg});
    }
  }
  std::printf("fuzzing: seed=%llu iterations=%llu seeds=%zu\n", (unsigned long long)seed,
              (unsigned long long)iterations, corpus.size());
  std::fflush(stdout);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < corpus.size(); ++i) {
    std::printf("seed %s\n", corpus_names[i].c_str());
    std::fflush(stdout);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(corpus[i].data()), corpus[i].size());
  }
  constexpr size_t kMaxCorpus = 256;
  for (uint64_t it = 0; it < iterations; ++it) {
    std::string input;
    if (corpus.empty() || rng() % 4 == 0) {
      input.resize(rng() % (max_len + 1));
      for (char& c : input) c = static_cast<char>(rng());
    } else {
      input = corpus[rng() % corpus.size()];
      const int mutations = 1 + static_cast<int>(rng() % 8);
      for (int m = 0; m < mutations; ++m) {
        switch (rng() % 5) {
          case 0:  // flip a byte
            if (!input.empty()) input[rng() % input.size()] ^= static_cast<char>(1 + rng() % 255);
            break;
          case 1:  // truncate
            if (!input.empty()) input.resize(rng() % input.size());
            break;
          case 2:  // insert a random byte
            if (input.size() < max_len) input.insert(input.begin() + rng() % (input.size() + 1), static_cast<char>(rng()));
            break;
          case 3:  // duplicate a slice
            if (!input.empty() && input.size() < max_len) {
              size_t a = rng() % input.size();
              size_t len = 1 + rng() % std::min<size_t>(16, input.size() - a);
              input.insert(rng() % (input.size() + 1), input.substr(a, len));
            }
            break;
          default:  // set an interesting value
            if (!input.empty()) {
              static const uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, '\r', '\n', '*', '$', ':'};
              input[rng() % input.size()] = static_cast<char>(kInteresting[rng() % sizeof(kInteresting)]);
            }
        }
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    if (corpus.size() < kMaxCorpus) corpus.push_back(std::move(input));
  }
  std::printf("fuzzing: done, no crash in %llu inputs\n", (unsigned long long)iterations);
  return 0;
}
