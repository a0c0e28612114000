// gRPC's side of the RPC comparison (contrib/bench/rpc_compare.sh): a unary echo
// server and a client timing round trips, as an application would write them
// (synchronous stub and service, one channel).
//
//   grpc_echo serve ADDRESS              (e.g. 127.0.0.1:50051 or unix:/tmp/echo.sock)
//   grpc_echo call ADDRESS BYTES COUNT   prints the mean round trip in microseconds
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "echo.grpc.pb.h"

namespace {

class EchoService final : public transit_bench::Echo::Service {
    grpc::Status Call(grpc::ServerContext*, const transit_bench::Blob* in,
                      transit_bench::Blob* out) override {
        out->set_data(in->data());
        return grpc::Status::OK;
    }
};

int serve(const std::string& address) {
    EchoService service;
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server) {
        std::fprintf(stderr, "grpc_echo: cannot listen on %s\n", address.c_str());
        return 1;
    }
    server->Wait();
    return 0;
}

// One call, checked: a benchmark that times failed calls measures nothing.
bool call_once(transit_bench::Echo::Stub& stub, const transit_bench::Blob& request) {
    grpc::ClientContext context;
    transit_bench::Blob reply;
    grpc::Status status = stub.Call(&context, request, &reply);
    if (!status.ok() || reply.data().size() != request.data().size()) {
        std::fprintf(stderr, "grpc_echo: call failed: %s\n", status.error_message().c_str());
        return false;
    }
    return true;
}

int call(const std::string& address, std::size_t bytes, long count) {
    auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
        std::fprintf(stderr, "grpc_echo: no server at %s\n", address.c_str());
        return 1;
    }
    auto stub = transit_bench::Echo::NewStub(channel);
    transit_bench::Blob request;
    request.set_data(std::string(bytes, 'x'));
    for (long i = 0; i < count / 10 + 1; ++i)  // warm-up
        if (!call_once(*stub, request)) return 1;
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < count; ++i)
        if (!call_once(*stub, request)) return 1;
    std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
    std::printf("%.3f\n", spent.count() / static_cast<double>(count));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "serve" && argc == 3) return serve(argv[2]);
    if (mode == "call" && argc == 5)
        return call(argv[2], std::strtoull(argv[3], nullptr, 10),
                    std::strtol(argv[4], nullptr, 10));
    std::fprintf(stderr, "usage: grpc_echo serve ADDRESS | call ADDRESS BYTES COUNT\n");
    return 2;
}
