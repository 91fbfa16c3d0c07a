// SPDX-License-Identifier: Apache-2.0
// Runs the fuzz target without libFuzzer: every file of the corpus folders
// given as arguments, then a fixed number of deterministic mutations of
// them, so that `make test` exercises the parsers on hostile input with any
// compiler. Usage: parser_fuzz_replay CORPUS_DIR... [--mutations N]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> corpus;
  long mutations = 20000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::strtol(argv[++i], nullptr, 10);
      continue;
    }
    for (const auto& entry : std::filesystem::directory_iterator(arg)) {
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream buffer;
      buffer << in.rdbuf();
      corpus.push_back(buffer.str());
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "%s: empty corpus\n", argv[0]);
    return 1;
  }
  for (const std::string& input : corpus) {
    for (char selector = 0; selector < 4; ++selector) Run(std::string(1, selector) + input.substr(1));
  }
  // Byte flips, insertions of syntax characters, truncations and splices.
  std::mt19937_64 random(12345);
  const std::string syntax = "[]-,=#\\\"\n 0123456789:@%*aZ";
  for (long m = 0; m < mutations; ++m) {
    std::string input = corpus[random() % corpus.size()];
    const int edits = 1 + static_cast<int>(random() % 8);
    for (int e = 0; e < edits && !input.empty(); ++e) {
      const std::size_t at = random() % input.size();
      switch (random() % 4) {
        case 0: input[at] = syntax[random() % syntax.size()]; break;
        case 1: input.insert(at, 1, syntax[random() % syntax.size()]); break;
        case 2: input.erase(at, 1 + random() % 4); break;
        default: input += corpus[random() % corpus.size()].substr(0, 64); break;
      }
    }
    Run(input);
  }
  std::printf("%s: %zu corpus inputs (x 4 first bytes) and %ld mutations ran clean\n", argv[0],
              corpus.size(), mutations);
  return 0;
}
