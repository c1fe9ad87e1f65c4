#!/usr/bin/python3
"""Tests of scripts/check-layers, check-sizes and check-standalone on small fake trees in a temp dir
(CTest: checks_self_test, label unit). Standard library only:
  python3 tests/checks/test_checks.py
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")

LAYERS = """\
# test layers
protocol
pooler/base
pooler/auth pooler/net
pooler/core
pooler/admin
pooler
"""


def run(script, root, *args):
    result = subprocess.run([sys.executable, os.path.join(SCRIPTS, script), "--root", root, *args],
                            capture_output=True, text=True, check=False)
    return result.returncode, result.stdout + result.stderr


class FakeTree:
    def __init__(self, files):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        for path, text in files.items():
            full = os.path.join(self.root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(textwrap.dedent(text))

    def __enter__(self):
        return self.root

    def __exit__(self, *exc):
        self.dir.cleanup()


CLEAN_TREE = {
    "pooler/LAYERS": LAYERS,
    "protocol/include/pgsluice/protocol/frame.h": "#pragma once\n",
    "protocol/src/frame.cc": '#include "pgsluice/protocol/frame.h"\n#include "internal.h"\n',
    "protocol/src/internal.h": "#pragma once\n",
    "pooler/base/list.h": "#pragma once\n",
    "pooler/auth/hba.h": '#pragma once\n#include "pooler/base/list.h"\n',
    "pooler/net/channel.h": '#include "pgsluice/protocol/frame.h"\n',
    "pooler/core/pool.h": '#include "pooler/auth/hba.h"\n#include "pooler/net/channel.h"\n',
    "pooler/core/pool.cc": '#include "pooler/core/pool.h"\n#include <vector>\n',
    "pooler/admin/show.cc": '#include "pooler/core/pool.h"\n',
    "pooler/main.cc": '#include "pooler/admin/show.h"\n',
    "pooler/admin/show.h": "#pragma once\n",
    "tests/unit/pool_test.cc": '#include "pooler/main.cc"\n#include "helper.h"\n',
    "tests/unit/helper.h": "#pragma once\n",
}


class CheckLayersTest(unittest.TestCase):
    def test_clean_tree_passes(self):
        with FakeTree(CLEAN_TREE) as root:
            code, out = run("check-layers", root)
        self.assertEqual(code, 0, out)

    def test_upward_include_and_cycle_fail_naming_file_and_line(self):
        tree = dict(CLEAN_TREE)
        tree["pooler/core/pool.cc"] = '#include "pooler/core/pool.h"\n\n#include "pooler/admin/show.h"\n'
        with FakeTree(tree) as root:
            code, out = run("check-layers", root)
        self.assertEqual(code, 1, out)
        self.assertIn("pooler/core/pool.cc:3: pooler/core includes pooler/admin/show.h", out)
        self.assertIn("include cycle between folders: pooler/admin, pooler/core", out)
        self.assertIn("pooler/admin -> pooler/core: pooler/admin/show.cc:1", out)

    def test_sibling_include_fails(self):
        tree = dict(CLEAN_TREE)
        tree["pooler/net/channel.cc"] = '#include "pooler/auth/hba.h"\n'
        with FakeTree(tree) as root:
            code, out = run("check-layers", root)
        self.assertEqual(code, 1, out)
        self.assertIn("pooler/net/channel.cc:1:", out)
        self.assertIn("sibling", out)

    def test_missing_header_fails_in_every_directory(self):
        tree = dict(CLEAN_TREE)
        tree["pooler/core/pool.cc"] = '#include "pooler/core/gone.h"\n'
        tree["fuzz/fuzz_pool.cc"] = '// comment\n#include "fuzz_check.h"\n'
        with FakeTree(tree) as root:
            code, out = run("check-layers", root)
        self.assertEqual(code, 1, out)
        self.assertIn('pooler/core/pool.cc:1: includes "pooler/core/gone.h", which does not exist', out)
        self.assertIn('fuzz/fuzz_pool.cc:2: includes "fuzz_check.h", which does not exist', out)

    def test_protocol_may_not_include_the_pooler(self):
        tree = dict(CLEAN_TREE)
        tree["protocol/src/frame.cc"] = '#include "pooler/base/list.h"\n'
        with FakeTree(tree) as root:
            code, out = run("check-layers", root)
        self.assertEqual(code, 1, out)
        self.assertIn("protocol/src/frame.cc:1: protocol includes pooler/base/list.h", out)

    def test_folder_without_a_layer_fails(self):
        tree = dict(CLEAN_TREE)
        tree["pooler/extra/thing.cc"] = "int x;\n"
        with FakeTree(tree) as root:
            code, out = run("check-layers", root)
        self.assertEqual(code, 1, out)
        self.assertIn("pooler/extra/: folder has no line in pooler/LAYERS", out)

    def test_graph_counts_edges_and_marks_upward_ones(self):
        tree = dict(CLEAN_TREE)
        tree["pooler/core/pool.cc"] = '#include "pooler/admin/show.h"\n#include "pooler/admin/show.h"\n'
        with FakeTree(tree) as root:
            code, out = run("check-layers", root, "--graph")
        self.assertEqual(code, 0, out)
        self.assertIn("pooler/core -> pooler/admin  2  UPWARD", out)
        self.assertIn("pooler/core -> pooler/auth  1\n", out)


def lines_of_body(count):
    return "".join(f"  x += {i};\n" for i in range(count))


class CheckSizesTest(unittest.TestCase):
    def sizes(self, text, *args):
        with FakeTree({"pooler/core/f.cc": text}) as root:
            return run("check-sizes", root, *args)

    def function_sizes(self, text):
        code, out = self.sizes(text, "--list-functions")
        self.assertEqual(code, 0, out)
        return [line.split(": ", 1)[1] for line in out.splitlines()]

    def test_function_of_100_lines_passes_and_101_fails(self):
        # Opening and closing brace lines count: 98 body lines + 2 = 100.
        code, out = self.sizes("int f(int x) {\n" + lines_of_body(98) + "}\n")
        self.assertEqual(code, 0, out)
        code, out = self.sizes("int f(int x) {\n" + lines_of_body(99) + "}\n")
        self.assertEqual(code, 1, out)
        self.assertIn("pooler/core/f.cc:1: f: 101 lines (at most 100)", out)

    def test_file_over_700_lines_fails(self):
        code, out = self.sizes("int x;\n" * 700)
        self.assertEqual(code, 0, out)
        code, out = self.sizes("int x;\n" * 701)
        self.assertEqual(code, 1, out)
        self.assertIn("pooler/core/f.cc: 701 lines (at most 700)", out)

    def test_braces_in_comments_and_literals_do_not_count(self):
        text = """\
            namespace a {
            // }
            /* } } */
            const char* s = "}}";
            const char* r = R"x(} ")x";
            char c = '}';
            int n = 1'000;
            #define BRACE }
            int f() {
              return '{' + "{"[0];
            }
            }  // namespace a
            """
        self.assertEqual(self.function_sizes(text), ["f: 3"])

    def test_members_lambdas_and_initializers(self):
        text = """\
            template <typename T>
            class Pool : public Base {
             public:
              Pool() : a_(1), b_{2} {
                auto l = [this] {
                  return a_;
                };
              }
              int size() const noexcept { return a_; }
              auto next() -> int {
                return 0;
              }
             private:
              int a_{0};
              std::function<void(int)> cb_{};
              struct Inner {
                void g() {}
              };
            };
            const int kTable[] = {1, 2, 3};
            bool Pool::operator==(const Pool& o) const {
              return true;
            }
            """
        self.assertEqual(self.function_sizes(text),
                         ["Pool: 5", "size: 1", "next: 3", "g: 1", "Pool::operator==: 3"])

    def test_real_tree_scans_without_unbalanced_braces(self):
        # Every function the scanner finds in the real tree has a plausible size: an unmatched
        # brace would swallow the rest of its file.
        root = os.path.join(SCRIPTS, "..")
        code, out = run("check-sizes", root, "--list-functions")
        self.assertEqual(code, 0, out)
        sizes = [int(line.rsplit(": ", 1)[1]) for line in out.splitlines()]
        self.assertGreater(len(sizes), 500)
        self.assertLess(max(sizes), 400)


# The paths check-standalone refuses, built from parts so that this file names none of them.
WORK, HOME = "/" + "work/", "/" + "home/"
SIBLING = ".." + "/shared"
JOIN = '"..", "' + 'shared"'  # the same as path parts in Python


class CheckStandaloneTest(unittest.TestCase):
    CLEAN = {
        "README.md": "See https://example.org/home/docs and integration/data/columns.txt.\n",
        "integration/harness.py":
            f'ANCHOR = os.path.join(HERE, "..", {JOIN}, "anchors", "pgbouncer-1.25.2")\n'
            f"# beside the repository at {SIBLING}/anchors/pgbouncer-1.25.2\n",
        "integration/test_x.py": 'DATA = os.path.join(HERE, "data", "columns.txt")\n',
        "build/CMakeCache.txt": f"CMAKE_HOME_DIRECTORY={WORK}repo\n",  # a build dir: skipped
    }

    def test_clean_tree_passes_with_the_listed_anchor(self):
        with FakeTree(self.CLEAN) as root:
            code, out = run("check-standalone", root)
        self.assertEqual(code, 0, out)

    def test_machine_paths_and_siblings_fail_naming_file_and_line(self):
        tree = dict(self.CLEAN)
        tree["docs/profile.md"] = f"Measured.\nScript: `{WORK}notes/s19/cg.sh`, or {HOME}me/x.\n"
        tree["integration/test_x.py"] = ('REF = os.path.join(HERE, "..",\n'
                                         f'                   {JOIN}, "reference")\n')
        tree["pooler/show.cc"] = f"// ({SIBLING}/reference/columns.txt)\n"
        with FakeTree(tree) as root:
            code, out = run("check-standalone", root)
        self.assertEqual(code, 1, out)
        self.assertIn(f"docs/profile.md:2: a machine's path ({WORK}", out)
        self.assertIn(f"docs/profile.md:2: a machine's path ({HOME}", out)
        self.assertIn("integration/test_x.py:2: a folder beside the repository", out)
        self.assertIn("pooler/show.cc:1: a folder beside the repository", out)
        self.assertIn("4 reference(s)", out)

    def test_anchor_allowed_only_in_the_listed_files_and_only_the_anchors(self):
        tree = dict(self.CLEAN)
        tree["integration/bench/run"] = f"PGBOUNCER = '{SIBLING}/anchors/pgbouncer-1.25.2'\n"
        tree["integration/harness.py"] += f"DATA = '{SIBLING}/reference/columns.txt'\n"
        with FakeTree(tree) as root:
            code, out = run("check-standalone", root)
        self.assertEqual(code, 1, out)
        self.assertIn("integration/bench/run:1:", out)
        self.assertIn("integration/harness.py:3:", out)
        self.assertIn("2 reference(s)", out)

    def test_in_a_git_work_tree_only_tracked_files_count(self):
        with FakeTree(self.CLEAN) as root:
            git = ["git", "-C", root, "-c", "user.name=t", "-c", "user.email=t@t"]
            subprocess.run(git + ["init", "-q"], check=True)
            subprocess.run(git + ["add", "README.md", "integration"], check=True)
            with open(os.path.join(root, "notes.txt"), "w") as f:
                f.write(f"{WORK}notes\n")  # untracked: not part of a clone
            code, out = run("check-standalone", root)
            self.assertEqual(code, 0, out)
            subprocess.run(git + ["add", "notes.txt"], check=True)
            code, out = run("check-standalone", root)
        self.assertEqual(code, 1, out)
        self.assertIn("notes.txt:1: a machine's path", out)


if __name__ == "__main__":
    unittest.main()
