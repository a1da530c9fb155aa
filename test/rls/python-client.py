"""A client of edgelimit rls that shares no code with it: Debian's python3-grpcio, with message
classes built at run time from Envoy's own .proto files, which protoc compiled into a descriptor
set (harness.ts). Reads a JSON list of RateLimitRequests on stdin, calls ShouldRateLimit with each
in order, and prints a JSON list of the responses (or {"error": {"code", "details"}})."""
import json
import sys

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

RATELIMIT_PROTO = "envoy/extensions/common/ratelimit/v3/ratelimit.proto"
WRAPPERS_PROTO = "google/protobuf/wrappers.proto"


def message_classes(path):
    files = descriptor_pb2.FileDescriptorSet.FromString(open(path, "rb").read())
    for file in files.file:
        if file.name != RATELIMIT_PROTO:
            continue
        # The protos @grpc/grpc-js-xds ships predate the descriptor's hits_addend (field 3, a
        # google.protobuf.UInt64Value, added in Envoy 1.34): add it with upstream's number and type.
        for message in file.message_type:
            if message.name == "RateLimitDescriptor" and all(f.number != 3 for f in message.field):
                field = message.field.add()
                field.name = "hits_addend"
                field.json_name = "hitsAddend"
                field.number = 3
                field.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                field.type_name = ".google.protobuf.UInt64Value"
        if WRAPPERS_PROTO not in file.dependency:
            file.dependency.append(WRAPPERS_PROTO)
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    factory = message_factory.MessageFactory(pool)

    def message(name):
        return factory.GetPrototype(pool.FindMessageTypeByName(name))

    return (
        message("envoy.service.ratelimit.v3.RateLimitRequest"),
        message("envoy.service.ratelimit.v3.RateLimitResponse"),
    )


def main():
    Request, Response = message_classes(sys.argv[1])
    requests = json.load(sys.stdin)
    channel = grpc.insecure_channel("127.0.0.1:" + sys.argv[2])
    should_rate_limit = channel.unary_unary(
        "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
        request_serializer=Request.SerializeToString,
        response_deserializer=Response.FromString,
    )
    results = []
    for body in requests:
        request = json_format.ParseDict(body, Request())
        try:
            response = should_rate_limit(request, timeout=10)
            results.append(json_format.MessageToDict(response, preserving_proto_field_name=True))
        except grpc.RpcError as error:
            results.append({"error": {"code": error.code().name, "details": error.details()}})
    channel.close()
    json.dump(results, sys.stdout)


main()
