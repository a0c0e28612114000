// The checks a candidate plugin file passes before the system loader sees it.
// dlopen trusts the file: it blocks forever opening a FIFO, and it maps segments
// that a truncated file does not hold, so the first touch of them is a SIGBUS.
// Everything here reads headers with plain reads and maps nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace transit::mca {

// "" when `path` is a regular file holding an ELF shared object for this
// process's machine, class and byte order whose program headers and segments lie
// inside the file; else the one-line reason it must not be loaded.  Never blocks:
// anything but a regular file (directory, FIFO, socket, device) is refused
// without being opened.
std::string check_plugin_file(const std::string& path);

// "x86_64", "aarch64", ...; "machine <n>" for one this table does not name.
std::string machine_name(std::uint16_t e_machine);

}  // namespace transit::mca
