// libFuzzer target for the plugin file reader: the input is the candidate
// file (in a memfd, named through /proc/self/fd), read by
// mca::check_plugin_file itself, what the component repository runs before
// dlopen.  An accepted file is an ELF shared object whose program headers and
// segments lie inside it; a refusal is one line.  See plugin_file.cmake.
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "framework/plugin_file.hpp"

namespace {

int file_fd() {
    static const int fd = ::memfd_create("fuzz_plugin_file", MFD_CLOEXEC);
    return fd;
}

// What dlopen would map: every segment with bytes in the file lies inside it.
bool segments_inside(const std::uint8_t* data, std::size_t size) {
    ElfW(Ehdr) eh;
    if (size < sizeof eh) return false;
    std::memcpy(&eh, data, sizeof eh);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_type != ET_DYN ||
        eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0)
        return false;
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
        const std::uint64_t at = std::uint64_t{eh.e_phoff} + std::uint64_t{i} * sizeof(ElfW(Phdr));
        if (at > size || sizeof(ElfW(Phdr)) > size - at) return false;
        ElfW(Phdr) ph;
        std::memcpy(&ph, data + at, sizeof ph);
        if (ph.p_filesz != 0 && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset))
            return false;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const int fd = file_fd();
    if (fd < 0 || ::ftruncate(fd, 0) != 0) __builtin_trap();
    if (size > 0 && ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) __builtin_trap();
    const std::string reason =
        transit::mca::check_plugin_file("/proc/self/fd/" + std::to_string(fd));
    if (reason.empty() ? !segments_inside(data, size) : reason.find('\n') != std::string::npos)
        __builtin_trap();
    return 0;
}
