// io_bench: safetensors read and write throughput against the OS tools on the
// same file, the figures of the foundation issue:
//   read  = mmap + validate header + checksum every tensor, vs `cat f > /dev/null`
//   write = SafetensorsWriter into an AtomicDir (incl. fsync + rename), vs
//           `cp f g && sync g`
// Each is the best of --repeat runs with a warm page cache. Not a test: it
// prints figures and the ratios (goals: read >= 0.8, write >= 0.7).
//
//   io_bench [--dir DIR] [--size_mb N] [--repeat N]
#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "qloom/cli/flags.h"
#include "qloom/core/format.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/io/safetensors_writer.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double time_shell(const std::string& cmd) {
  const auto t0 = Clock::now();
  if (std::system(cmd.c_str()) != 0) {
    std::cerr << "io_bench: command failed: " << cmd << "\n";
    std::exit(1);
  }
  return seconds_since(t0);
}

// Sum of 64-bit words with four independent lanes (the compiler vectorizes it).
uint64_t checksum(std::span<const std::byte> data) {
  uint64_t lanes[4] = {0, 0, 0, 0};
  const size_t words = data.size() / 8;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  for (size_t i = 0; i + 4 <= words; i += 4) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + 8 * (i + k), 8);
      lanes[k] += w;
    }
  }
  uint64_t sum = lanes[0] ^ (lanes[1] << 1) ^ (lanes[2] << 2) ^ (lanes[3] << 3);
  for (size_t i = (words / 4) * 4 * 8; i < data.size(); ++i) sum = sum * 31 + p[i];
  return sum;
}

// Opens the file (header validation) and checksums every tensor, tensors split
// over the hardware threads.
uint64_t read_and_checksum(const fs::path& file) {
  const auto st = qloom::io::SafetensorsFile::open(file);
  const auto& tensors = st.tensors();
  const unsigned nthreads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<uint64_t> sums(nthreads, 0);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < nthreads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i = t; i < tensors.size(); i += nthreads)
        sums[t] += checksum(st.view(tensors[i]).data) * (2 * i + 1);  // position-dependent
    });
  }
  for (auto& th : pool) th.join();
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  return total;
}

std::vector<qloom::io::TensorSpec> bench_specs(uint64_t size_mb) {
  // 16 MiB bf16 tensors shaped like 2048 x 4096 projections.
  std::vector<qloom::io::TensorSpec> specs;
  const uint64_t per = 16ULL << 20;
  for (uint64_t i = 0; i * per < size_mb << 20; ++i)
    specs.push_back({"model.layers." + std::to_string(i) + ".mlp.up_proj.weight",
                     qloom::DType::kBF16, {2048, 4096}});
  return specs;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"safetensors read/write throughput vs cat/cp", "io_bench"};
  std::string dir = "bench-data";
  uint64_t size_mb = 1024;
  int repeat = 3;
  app.add_option(qloom::cli::flag_names("dir"), dir, "scratch directory");
  app.add_option(qloom::cli::flag_names("size_mb"), size_mb, "file size in MiB (>= 1024 for the goal)");
  app.add_option(qloom::cli::flag_names("repeat"), repeat, "runs per measurement (best is kept)");
  CLI11_PARSE(app, argc, argv);

  try {
    fs::create_directories(dir);
    const auto specs = bench_specs(size_mb);
    uint64_t bytes = 0;
    for (const auto& s : specs) bytes += s.nbytes();
    // One buffer of bf16-looking data reused for every tensor.
    std::vector<std::byte> buf(specs.front().nbytes());
    uint64_t x = 0x12345678;
    for (size_t i = 0; i < buf.size(); i += 2) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      buf[i] = std::byte(x >> 56);
      buf[i + 1] = std::byte(0x3c + ((x >> 48) & 0x3));
    }

    const fs::path model = fs::path(dir) / "bench-model";
    const fs::path file = model / "model.safetensors";
    double best_write = 1e30;
    for (int r = 0; r < repeat; ++r) {
      fs::remove_all(model);
      const auto t0 = Clock::now();
      qloom::io::AtomicDir out(model);
      qloom::io::SafetensorsWriter w(out.staging(), specs, {});
      for (const auto& s : specs) w.write(s.name, buf);
      w.finish();
      out.commit();
      best_write = std::min(best_write, seconds_since(t0));
    }
    const std::string copy = (fs::path(dir) / "copy.safetensors").string();
    double best_cp = 1e30;
    for (int r = 0; r < repeat; ++r) {
      fs::remove(copy);
      best_cp = std::min(best_cp, time_shell("cp '" + file.string() + "' '" + copy + "' && sync '" + copy + "'"));
    }
    fs::remove(copy);

    time_shell("cat '" + file.string() + "' > /dev/null");  // warm the page cache
    double best_cat = 1e30, best_read = 1e30;
    uint64_t sum = 0;
    for (int r = 0; r < repeat; ++r) {
      best_cat = std::min(best_cat, time_shell("cat '" + file.string() + "' > /dev/null"));
      const auto t0 = Clock::now();
      sum = read_and_checksum(file);
      best_read = std::min(best_read, seconds_since(t0));
    }

    const double gib = static_cast<double>(bytes) / (1ULL << 30);
    std::printf("io_bench: %s, %zu tensors, best of %d, warm page cache, %u threads\n",
                qloom::format_bytes(bytes).c_str(), specs.size(), repeat,
                std::max(1u, std::thread::hardware_concurrency()));
    std::printf("  %-34s %8.2f GiB/s  (%.3f s)\n", "qloom read+checksum", gib / best_read, best_read);
    std::printf("  %-34s %8.2f GiB/s  (%.3f s)\n", "cat file > /dev/null", gib / best_cat, best_cat);
    std::printf("  %-34s %8.2f   (goal >= 0.8)\n", "read ratio qloom/cat", best_cat / best_read);
    std::printf("  %-34s %8.2f GiB/s  (%.3f s)\n", "qloom write (fsync + rename)", gib / best_write, best_write);
    std::printf("  %-34s %8.2f GiB/s  (%.3f s)\n", "cp file copy && sync copy", gib / best_cp, best_cp);
    std::printf("  %-34s %8.2f   (goal >= 0.7)\n", "write ratio qloom/cp", best_cp / best_write);
    std::printf("  checksum %016llx\n", static_cast<unsigned long long>(sum));
    fs::remove_all(model);
  } catch (const std::exception& e) {
    std::cerr << "io_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
