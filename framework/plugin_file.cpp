#include "framework/plugin_file.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>

namespace transit::mca {

namespace {

using Ehdr = ElfW(Ehdr);
using Phdr = ElfW(Phdr);

constexpr unsigned char host_class = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
constexpr unsigned char host_data =
    std::endian::native == std::endian::little ? ELFDATA2LSB : ELFDATA2MSB;

// libtransit's own ELF header is mapped where dladdr says the library starts,
// so the machine is the one this code was built for, whatever the compiler.
std::uint16_t host_machine() {
    static const std::uint16_t machine = [] {
        Dl_info info{};
        if (::dladdr(reinterpret_cast<void*>(&machine_name), &info) == 0 ||
            info.dli_fbase == nullptr)
            return std::uint16_t{EM_NONE};
        Ehdr self{};
        std::memcpy(&self, info.dli_fbase, sizeof self);
        return self.e_machine;
    }();
    return machine;
}

class ReadOnlyFile {
  public:
    explicit ReadOnlyFile(const std::string& path)
        : fd_(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) {}
    ~ReadOnlyFile() {
        if (fd_ >= 0) ::close(fd_);
    }
    ReadOnlyFile(const ReadOnlyFile&) = delete;
    ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

    int fd() const { return fd_; }

    // Exactly `size` bytes at `offset`, or false.
    bool read_at(void* out, std::size_t size, std::uint64_t offset) const {
        auto* p = static_cast<char*>(out);
        while (size > 0) {
            ssize_t n = ::pread(fd_, p, size, static_cast<off_t>(offset));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            p += n;
            size -= static_cast<std::size_t>(n);
            offset += static_cast<std::uint64_t>(n);
        }
        return true;
    }

  private:
    int fd_;
};

std::string_view kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

std::string_view class_text(unsigned char elf_class) {
    switch (elf_class) {
        case ELFCLASS32:
            return "32-bit";
        case ELFCLASS64:
            return "64-bit";
    }
    return "unknown class";
}

std::string_view data_text(unsigned char data) {
    switch (data) {
        case ELFDATA2LSB:
            return "little-endian";
        case ELFDATA2MSB:
            return "big-endian";
    }
    return "unknown byte order";
}

// e_machine sits at the same offset in both classes, in the file's byte order.
std::uint16_t file_machine(const std::array<unsigned char, 20>& head) {
    const unsigned lo = head[18];
    const unsigned hi = head[19];
    const unsigned value = head[EI_DATA] == ELFDATA2MSB ? (lo << 8) | hi : (hi << 8) | lo;
    return static_cast<std::uint16_t>(value);
}

std::string platform_text(std::uint16_t machine, unsigned char elf_class, unsigned char data,
                          bool with_details) {
    std::string text = machine_name(machine);
    if (with_details) text += fmt::format(" ({}, {})", class_text(elf_class), data_text(data));
    return text;
}

// The first 20 bytes decide whether the file is an ELF for this process at all.
std::string check_identity(const std::array<unsigned char, 20>& head) {
    const unsigned char elf_class = head[EI_CLASS];
    const unsigned char data = head[EI_DATA];
    const std::uint16_t machine = file_machine(head);
    const std::uint16_t here = host_machine();
    const bool same_layout = elf_class == host_class && data == host_data;
    if (same_layout && (machine == here || here == EM_NONE)) return {};
    return fmt::format("built for {}, this is {}",
                       platform_text(machine, elf_class, data, !same_layout),
                       platform_text(here, host_class, host_data, !same_layout));
}

std::string check_segments(const ReadOnlyFile& file, const Ehdr& eh, std::uint64_t size) {
    if (eh.e_phentsize != sizeof(Phdr) || eh.e_phnum == 0 || eh.e_phnum == PN_XNUM)
        return fmt::format("malformed ELF header ({} program headers of {} bytes)", eh.e_phnum,
                           eh.e_phentsize);
    const std::uint64_t table_end =
        std::uint64_t{eh.e_phoff} + std::uint64_t{eh.e_phnum} * sizeof(Phdr);
    if (eh.e_phoff > size || table_end > size)
        return fmt::format("truncated: its program headers end at byte {}, the file has {} bytes",
                           table_end, size);
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
        Phdr ph{};
        if (!file.read_at(&ph, sizeof ph, eh.e_phoff + std::uint64_t{i} * sizeof(Phdr)))
            return fmt::format("cannot read program header {}", i);
        if (ph.p_filesz == 0) continue;
        const std::uint64_t offset = ph.p_offset;
        const std::uint64_t bytes = ph.p_filesz;
        if (offset > size || bytes > size - offset)
            return fmt::format("truncated: segment {} ends at byte {}, the file has {} bytes", i,
                               offset + bytes, size);
        if (ph.p_type == PT_LOAD && ph.p_filesz > ph.p_memsz)
            return fmt::format("malformed ELF segment {} ({} bytes in the file, {} in memory)", i,
                               ph.p_filesz, ph.p_memsz);
    }
    return {};
}

std::string check_elf(const ReadOnlyFile& file, std::uint64_t size) {
    std::array<unsigned char, 20> head{};
    if (size < head.size() || !file.read_at(head.data(), head.size(), 0) ||
        std::memcmp(head.data(), ELFMAG, SELFMAG) != 0)
        return "not a shared object (no ELF header)";
    if (std::string wrong = check_identity(head); !wrong.empty()) return wrong;
    Ehdr eh{};
    if (size < sizeof eh)
        return fmt::format("truncated: {} bytes, an ELF header alone needs {}", size, sizeof eh);
    if (!file.read_at(&eh, sizeof eh, 0)) return "cannot read its ELF header";
    if (eh.e_type != ET_DYN)
        return fmt::format("not a shared object (ELF type {}, {})", eh.e_type,
                           eh.e_type == ET_EXEC  ? "an executable"
                           : eh.e_type == ET_REL ? "an object file before linking"
                                                 : "not a library");
    return check_segments(file, eh, size);
}

}  // namespace

std::string machine_name(std::uint16_t e_machine) {
    switch (e_machine) {
        case EM_X86_64:
            return "x86_64";
        case EM_386:
            return "i386";
        case EM_AARCH64:
            return "aarch64";
        case EM_ARM:
            return "arm";
        case EM_PPC64:
            return "ppc64";
        case EM_PPC:
            return "ppc";
        case EM_RISCV:
            return "riscv";
        case EM_S390:
            return "s390";
        case EM_SPARCV9:
            return "sparc64";
        case EM_MIPS:
            return "mips";
        case EM_LOONGARCH:
            return "loongarch";
        case EM_IA_64:
            return "ia64";
    }
    return fmt::format("machine {}", e_machine);
}

std::string check_plugin_file(const std::string& path) {
    // stat first: opening a FIFO or a device can block or act on the device.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return fmt::format("cannot examine it: {}", std::strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fmt::format("{}, not a regular file: not opened", kind_of(st.st_mode));
    ReadOnlyFile file(path);
    if (file.fd() < 0) return fmt::format("cannot open it: {}", std::strerror(errno));
    // The name may have been replaced since stat: judge what was opened.
    if (::fstat(file.fd(), &st) != 0)
        return fmt::format("cannot examine it: {}", std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return fmt::format("{}, not a regular file", kind_of(st.st_mode));
    return check_elf(file, static_cast<std::uint64_t>(st.st_size));
}

}  // namespace transit::mca
