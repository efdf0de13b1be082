"""Server reflection as grpc.reflection.v1 (grpcurl asks it first) and as
v1alpha (older clients).

grpcio-reflection ships v1alpha only. v1 is the same protocol under another
package name, so the same servicer answers both: v1 requests and responses
are v1alpha's on the wire, and v1's descriptors, derived from v1alpha's, sit
in the default pool so that reflection also describes itself as v1.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

V1_PACKAGE = "grpc.reflection.v1"
V1_FILE = "grpc/reflection/v1/reflection.proto"
V1_SERVICE_NAME = f"{V1_PACKAGE}.ServerReflection"
V1ALPHA_SERVICE_NAME: str = reflection.SERVICE_NAME


def _add_v1_descriptors() -> None:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(V1_FILE)
        return  # already there (added by us, or by a v1 module of a later grpcio)
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    alpha = f".{reflection_pb2.DESCRIPTOR.package}."

    def renamed(type_name: str) -> str:
        return type_name.replace(alpha, f".{V1_PACKAGE}.", 1)

    proto.name, proto.package = V1_FILE, V1_PACKAGE
    for message in proto.message_type:
        for field in message.field:
            if field.type_name:  # message fields only (set on a scalar, it is invalid)
                field.type_name = renamed(field.type_name)
    for method in proto.service[0].method:
        method.input_type, method.output_type = (
            renamed(method.input_type),
            renamed(method.output_type),
        )
    pool.Add(proto)


def enable_reflection(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    """Reflection over `service_names`, health and reflection itself, as v1
    and v1alpha."""
    _add_v1_descriptors()
    names = [*service_names, V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME]
    servicer = reflection.aio.ReflectionServicer(names)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(V1_SERVICE_NAME, {"ServerReflectionInfo": v1})]
    )
