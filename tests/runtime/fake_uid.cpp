// LD_PRELOAD shim: the process claims to be user TRANSIT_FAKE_UID (group
// TRANSIT_FAKE_GID) to whoever asks through libc, as a hostile neighbour
// would to a PMIx server that believes what its clients say.
#include <sys/types.h>

#include <cstdlib>

namespace {

unsigned from_env(const char* name) {
    const char* v = std::getenv(name);
    return v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : 0u;
}

}  // namespace

extern "C" {
uid_t getuid() {
    return from_env("TRANSIT_FAKE_UID");
}
uid_t geteuid() {
    return from_env("TRANSIT_FAKE_UID");
}
gid_t getgid() {
    return from_env("TRANSIT_FAKE_GID");
}
gid_t getegid() {
    return from_env("TRANSIT_FAKE_GID");
}
}
