// Replays files through LLVMFuzzerTestOneInput without libFuzzer, so any
// compiler (gcc included) can run the fuzz corpus as a regression test.
//
//   qloom_fuzz_replay <file-or-directory>...
//
// Directories are read recursively, files in sorted order. Arguments that
// start with '-' (libFuzzer flags) are ignored. Exits 0 when every input ran;
// a finding crashes or throws out of main, which fails the test.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

bool run_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "qloom_fuzz_replay: cannot read %s\n", p.c_str());
    return false;
  }
  const std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // A private heap copy: reads past the end are caught by ASan builds.
  std::vector<uint8_t> input(buf.begin(), buf.end());
  LLVMFuzzerTestOneInput(input.empty() ? nullptr : input.data(), input.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> files;
  int roots = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.empty() && arg[0] == '-') continue;
    ++roots;
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(arg, ec))
        if (e.is_regular_file()) files.push_back(e.path());
      if (ec) {
        std::fprintf(stderr, "qloom_fuzz_replay: cannot list %s: %s\n", arg.c_str(),
                     ec.message().c_str());
        return 2;
      }
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "qloom_fuzz_replay: no such file or directory: %s\n", arg.c_str());
      return 2;
    }
  }
  if (roots == 0) {
    std::fprintf(stderr, "usage: qloom_fuzz_replay <file-or-directory>...\n");
    return 2;
  }
  std::sort(files.begin(), files.end());
  size_t ran = 0;
  for (const auto& f : files) {
    if (!run_file(f)) return 2;
    ++ran;
  }
  std::printf("qloom_fuzz_replay: ran %zu inputs\n", ran);
  return ran > 0 ? 0 : 1;
}
