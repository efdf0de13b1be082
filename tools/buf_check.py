"""`buf lint` (STANDARD) and `buf breaking` against main, on protoc-built images.

The BSR is out of reach, so buf reads images that tools/gen_protos.py builds
with validate.proto taken from the installed protovalidate package.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUF = Path(sys.executable).parent / "buf"
OUR_FILES = "agenthost"


def build_image(proto_dir: Path, image: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "gen_protos.py"),
            "--proto-dir",
            str(proto_dir),
            "--out",
            str(image.parent / "unused"),
            "--image",
            str(image),
            "--image-only",
        ],
        check=True,
    )


def main_proto_tree(into: Path) -> Path | None:
    """Extract `proto/` as it is on main, or None when main has none yet."""
    ref = "main" if _git("rev-parse", "--verify", "--quiet", "main") else None
    if ref is None or not _git("ls-tree", "-d", ref, "proto"):
        return None
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "archive", ref, "proto"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "proto"


def _git(*args: str) -> str:
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else ""


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        current = work / "current.binpb"
        build_image(ROOT / "proto", current)
        config = ["--config", str(ROOT / "buf.yaml")]
        lint = subprocess.run(
            [str(BUF), "lint", str(current), "--path", OUR_FILES, *config], check=False
        )
        if lint.returncode != 0:
            return lint.returncode
        base_tree = main_proto_tree(work / "main")
        if base_tree is None:
            print("buf breaking: main has no proto/ yet, nothing to compare")
            return 0
        against = work / "main.binpb"
        build_image(base_tree, against)
        breaking = subprocess.run(
            [
                str(BUF),
                "breaking",
                str(current),
                "--against",
                str(against),
                "--path",
                OUR_FILES,
                *config,
            ],
            check=False,
        )
        shutil.rmtree(work / "main", ignore_errors=True)
        return breaking.returncode


if __name__ == "__main__":
    sys.exit(main())
