// screenshot_check.cpp — the driver behind the `gui` CTest label: runs one `lathe gui …`
// command under Xvfb and checks its exit code and the PNGs it wrote.
//
//   gui_screenshot_check [--exit N] [--min-kb K] [--png OUT.png [--colour R,G,B]… [--size WxH]]…
//                        [--same A.png B.png]… [--no-xvfb] -- COMMAND ARGS…
//
// Exits 0 when every check holds, 1 with a message naming the failed check otherwise, and
// 77 (CTest SKIP_RETURN_CODE) when xvfb-run is not installed. Each --png must exist, be at
// least K KiB and not be blank: at least 2% of its pixels differ from the most common
// colour (the background). A --colour after a --png asks that at least 1000 of that PNG's
// pixels lie within ±12 of the colour (the error panel's border, a category fill, the
// heat colour of the slowest kernel, …). A script's own screenshots (gui.screenshot) are
// checked the same way by naming them with --png. --same A B asks that two of them be
// identical pixel for pixel (a partial redraw against the same view drawn whole).
#include <stb_image.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return 1;
}

std::string quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

}  // namespace

namespace {

struct PngCheck {
  std::string path;
  std::vector<std::array<int, 3>> colours;
  int want_w = 0, want_h = 0;   // --size WxH after the --png: the image's dimensions
};

int check_png(const PngCheck& c, long min_kb) {
  std::error_code ec;
  auto bytes = std::filesystem::file_size(c.path, ec);
  if (ec) return fail("no screenshot at " + c.path);
  if (static_cast<long>(bytes) < min_kb * 1024) return fail(c.path + " is only " + std::to_string(bytes) + " bytes");
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load(c.path.c_str(), &w, &h, &n, 3);
  if (!px) return fail("cannot decode " + c.path);
  std::map<int, long> hist;
  for (long p = 0; p < long(w) * h; ++p) ++hist[(px[3 * p] << 16) | (px[3 * p + 1] << 8) | px[3 * p + 2]];
  long top = 0;
  for (auto& [col, k] : hist) top = std::max(top, k);
  double varied = 1.0 - double(top) / (double(w) * h);
  std::printf("%s: %dx%d, %zu bytes, %.1f%% non-background, %zu colours\n", c.path.c_str(), w, h, size_t(bytes),
              100 * varied, hist.size());
  int rc = 0;
  if (varied < 0.02) rc = fail(c.path + ": the screenshot is blank");
  if (c.want_w && (w != c.want_w || h != c.want_h))
    rc = fail(c.path + ": " + std::to_string(w) + "x" + std::to_string(h) + ", expected " + std::to_string(c.want_w) +
              "x" + std::to_string(c.want_h));
  for (auto& col : c.colours) {
    long near = 0;
    for (long p = 0; p < long(w) * h; ++p)
      if (std::abs(px[3 * p] - col[0]) <= 12 && std::abs(px[3 * p + 1] - col[1]) <= 12 && std::abs(px[3 * p + 2] - col[2]) <= 12) ++near;
    if (near < 1000) rc = fail(c.path + ": colour " + std::to_string(col[0]) + "," + std::to_string(col[1]) + "," +
                              std::to_string(col[2]) + " is on only " + std::to_string(near) + " pixels");
  }
  stbi_image_free(px);
  return rc;
}

// Both decode to the same size and the same pixels; else how many differ and where.
int check_same(const std::string& a, const std::string& b) {
  int wa = 0, ha = 0, wb = 0, hb = 0, n = 0;
  unsigned char* pa = stbi_load(a.c_str(), &wa, &ha, &n, 3);
  unsigned char* pb = stbi_load(b.c_str(), &wb, &hb, &n, 3);
  int rc = 0;
  if (!pa || !pb) rc = fail("cannot decode " + a + " or " + b);
  else if (wa != wb || ha != hb) rc = fail(a + " and " + b + " differ in size");
  else {
    long diff = 0, first = -1;
    for (long p = 0; p < long(wa) * ha; ++p)
      if (pa[3 * p] != pb[3 * p] || pa[3 * p + 1] != pb[3 * p + 1] || pa[3 * p + 2] != pb[3 * p + 2]) {
        if (first < 0) first = p;
        ++diff;
      }
    if (diff) rc = fail(a + " and " + b + " differ in " + std::to_string(diff) + " pixels, the first at (" +
                        std::to_string(first % wa) + ", " + std::to_string(first / wa) + ")");
    else std::printf("%s and %s are identical\n", a.c_str(), b.c_str());
  }
  stbi_image_free(pa);
  stbi_image_free(pb);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  int want_exit = 0;
  long min_kb = 0;
  bool xvfb = true;
  std::vector<PngCheck> pngs;
  std::vector<std::pair<std::string, std::string>> same;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") { ++i; break; }
    if (a == "--exit" && i + 1 < argc) want_exit = std::atoi(argv[++i]);
    else if (a == "--png" && i + 1 < argc) pngs.push_back({argv[++i], {}});
    else if (a == "--min-kb" && i + 1 < argc) min_kb = std::atol(argv[++i]);
    else if (a == "--no-xvfb") xvfb = false;
    else if (a == "--same" && i + 2 < argc) same.push_back({argv[i + 1], argv[i + 2]}), i += 2;
    else if (a == "--size" && i + 1 < argc) {
      if (pngs.empty()) return fail("--size must follow a --png");
      if (std::sscanf(argv[++i], "%dx%d", &pngs.back().want_w, &pngs.back().want_h) != 2) return fail("bad --size");
    }
    else if (a == "--colour" && i + 1 < argc) {
      std::array<int, 3> c{};
      if (std::sscanf(argv[++i], "%d,%d,%d", &c[0], &c[1], &c[2]) != 3) return fail("bad --colour");
      if (pngs.empty()) return fail("--colour must follow a --png");
      pngs.back().colours.push_back(c);
    } else return fail("unknown option " + a);
  }
  if (i >= argc) return fail("no command after --");
  if (xvfb && std::system("command -v xvfb-run >/dev/null 2>&1") != 0) {
    std::printf("SKIP: xvfb-run is not installed\n");
    return 77;
  }
  for (auto& p : pngs) std::filesystem::remove(p.path);
  for (auto& [a, b] : same) std::filesystem::remove(a), std::filesystem::remove(b);

  // Under xvfb-run the command's own exit code is also written to a file: xvfb-run exits 5
  // when it cannot remove its temporary directory (seen under parallel xvfb-run -a, and
  // twice in a row for a command that exits 1), which hides the command's code.
  char code_file[] = "/tmp/lathe-gui-exit-XXXXXX";
  if (xvfb) {
    int fd = mkstemp(code_file);
    if (fd < 0) return fail("cannot create a temporary file");
    close(fd);
  }
  std::string cmd = xvfb ? "xvfb-run -a -s '-screen 0 1280x800x24' sh -c '\"$0\" \"$@\"; r=$?; echo $r > " +
                               std::string(code_file) + "; exit $r' "
                         : "";
  for (int k = i; k < argc; ++k) cmd += quote(argv[k]) + " ";
  std::printf("running: %s\n", cmd.c_str());
  std::fflush(stdout);
  int status = std::system(cmd.c_str());
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (xvfb && code == 5 && want_exit != 5) {
    int own = -1;
    if (FILE* f = std::fopen(code_file, "r")) {
      if (std::fscanf(f, "%d", &own) != 1) own = -1;
      std::fclose(f);
    }
    std::printf("xvfb-run exited 5 (its own clean-up); the command's exit code: %d\n", own);
    if (own >= 0) code = own;
  }
  if (xvfb) std::remove(code_file);
  if (code != want_exit) return fail("exit code " + std::to_string(code) + ", expected " + std::to_string(want_exit));
  int rc = 0;
  for (auto& p : pngs)
    if (check_png(p, min_kb) != 0) rc = 1;
  for (auto& [a, b] : same)
    if (check_same(a, b) != 0) rc = 1;
  return rc;
}
