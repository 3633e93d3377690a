"""Packs the extension module the workspace build already made (`target/<profile>/lib_native.so`)
and the Python package into a wheel (PEP 427), for CI.

Why not `maturin build` there: maturin compiles the binding as a package of its own, so cargo
resolves features for `mppq-py` alone — without the xtask's `ndarray` and the dev-dependencies'
features the workspace build unifies — and builds Burn and every mppq crate a second time
(about 9 minutes on 2 cores). The `.so` of `cargo build --workspace` is the same extension module
(PyO3's `extension-module` leaves libpython unlinked; maturin adds no link arguments on Linux), so
CI packs that one. Release wheels for users come from maturin (docs/python.md).

    python crates/mppq-py/tools/wheel_from_build.py target/debug/lib_native.so OUT_DIR
"""

from __future__ import annotations

import base64
import hashlib
import re
import sys
import sysconfig
import zipfile
from pathlib import Path

CRATE = Path(__file__).resolve().parents[1]


def version() -> str:
    """The workspace version (the crate says `version.workspace = true`)."""
    text = (CRATE.parents[1] / "Cargo.toml").read_text()
    match = re.search(r'\[workspace\.package\][^\[]*?\nversion = "([^"]+)"', text)
    if not match:
        sys.exit("no [workspace.package] version in Cargo.toml")
    return match.group(1)


def dependencies() -> list[str]:
    """`[project] dependencies` of pyproject.toml (one line, as written there)."""
    text = (CRATE / "pyproject.toml").read_text()
    match = re.search(r"^dependencies = \[(.*)\]$", text, re.M)
    return re.findall(r'"([^"]+)"', match.group(1)) if match else []


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main() -> None:
    so, out = Path(sys.argv[1]), Path(sys.argv[2])
    ver = version()
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = f"cp39-abi3-{platform}"
    dist_info = f"mppq_rs-{ver}.dist-info"
    files: dict[str, bytes] = {}
    for path in sorted((CRATE / "python" / "mppq_rs").iterdir()):
        if path.is_file() and path.suffix in (".py", ".pyi", ".typed"):
            files[f"mppq_rs/{path.name}"] = path.read_bytes()
    files["mppq_rs/_native.abi3.so"] = so.read_bytes()
    metadata = [
        "Metadata-Version: 2.1",
        "Name: mppq-rs",
        f"Version: {ver}",
        "Requires-Python: >=3.9",
        *(f"Requires-Dist: {d}" for d in dependencies()),
    ]
    files[f"{dist_info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    wheel = ["Wheel-Version: 1.0", "Generator: mppq wheel_from_build.py", "Root-Is-Purelib: false", f"Tag: {tag}"]
    files[f"{dist_info}/WHEEL"] = ("\n".join(wheel) + "\n").encode()
    record = [record_line(name, data) for name, data in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"mppq_rs-{ver}-{tag}.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    print(target)


if __name__ == "__main__":
    main()
