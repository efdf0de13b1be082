"""Generate Python code, type stubs and a buf image from `proto/`.

`buf/validate/validate.proto` is not copied into the repository: protovalidate
ships its FileDescriptorProto, so we assemble a FileDescriptorSet of it and the
Google files it imports and hand that to protoc with --descriptor_set_in.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from google.protobuf import (
    descriptor_pb2,
    duration_pb2,
    field_mask_pb2,
    struct_pb2,
    timestamp_pb2,
)
from google.rpc import error_details_pb2
from protovalidate._gen.buf.validate import validate_pb

VALIDATE_PROTO = "buf/validate/validate.proto"
# The rich error details (ErrorInfo, BadRequest) every service sends: in the
# image too, so clients in other languages generate their types from it
# (googleapis-common-protos carries the descriptor; nothing is copied).
ERROR_DETAILS_PROTO = "google/rpc/error_details.proto"


def dependency_descriptor_set() -> bytes:
    """validate.proto, google/rpc/error_details.proto and the well-known files
    they need, as a FileDescriptorSet."""
    files = descriptor_pb2.FileDescriptorSet()
    modules = (
        descriptor_pb2,
        duration_pb2,
        field_mask_pb2,
        timestamp_pb2,
        struct_pb2,
        error_details_pb2,
    )
    for module in modules:
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        files.file.append(proto)
    validate = descriptor_pb2.FileDescriptorProto.FromString(validate_pb.desc().proto.to_binary())
    files.file.append(validate)
    return files.SerializeToString()


def protoc(args: list[str]) -> None:
    command = [sys.executable, "-m", "grpc_tools.protoc", *args]
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise SystemExit(f"protoc failed: {' '.join(command)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--proto-dir", type=Path, default=Path("proto"))
    parser.add_argument("--out", type=Path, default=Path("gen"))
    parser.add_argument("--image", type=Path, help="also write a buf image (binpb) here")
    parser.add_argument("--image-only", action="store_true")
    options = parser.parse_args()

    work = options.out.parent / (options.out.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    deps = work / "deps.binpb"
    deps.write_bytes(dependency_descriptor_set())
    sources = sorted(
        str(p.relative_to(options.proto_dir)) for p in options.proto_dir.rglob("*.proto")
    )
    base = [f"--descriptor_set_in={deps}", f"-I{options.proto_dir}"]

    image = work / "image.binpb"
    if options.image:
        # A FileDescriptorSet with every import: buf reads it as an image, and
        # clients in other languages load their stubs from it.
        protoc(
            [
                *base,
                "--include_imports",
                "--include_source_info",
                f"-o{image}",
                *sources,
                ERROR_DETAILS_PROTO,
            ]
        )
    if options.image_only:
        _move_image(image, options.image)
        shutil.rmtree(work)
        return

    bin_dir = Path(sys.executable).parent
    python_out = work / "python"
    python_out.mkdir()
    protoc(
        [
            *base,
            f"--python_out={python_out}",
            f"--grpc_python_out={python_out}",
            f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
            f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
            f"--mypy_out={python_out}",
            f"--mypy_grpc_out={python_out}",
            *sources,
            VALIDATE_PROTO,
        ]
    )
    for package_dir in [p for p in python_out.rglob("*") if p.is_dir()]:
        (package_dir / "__init__.py").touch()
    for top in [p for p in python_out.iterdir() if p.is_dir()]:
        (top / "py.typed").touch()
    shutil.rmtree(options.out, ignore_errors=True)
    python_out.rename(options.out)
    if options.image:
        _move_image(image, options.image)
    shutil.rmtree(work)


def _move_image(built: Path, wanted: Path | None) -> None:
    if wanted is not None:
        wanted.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(built, wanted)


if __name__ == "__main__":
    main()
