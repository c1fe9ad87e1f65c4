#!/usr/bin/python3
"""Tests of scripts/check-layers on small fake trees in a temp dir
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


if __name__ == "__main__":
    unittest.main()
