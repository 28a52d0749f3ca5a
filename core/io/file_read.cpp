// Opened with O_NONBLOCK so that opening a FIFO never waits for a writer; the
// type and size come from fstat on the open descriptor (no race with a rename).
#include "core/io/file_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/io/error.hpp"

namespace attnviz {

namespace {

class Fd {
public:
    explicit Fd(int fd) : m_fd(fd) {}
    ~Fd() {
        if (m_fd >= 0) ::close(m_fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return m_fd; }

private:
    int m_fd;
};

}  // namespace

int open_regular_file(const std::string& path, const std::string& what, uint64_t* size) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw FileError("cannot open " + what + " '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw FileError("cannot read " + what + " '" + path + "': " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw FileError(what + " '" + path + "' is " + describe_file_type(st.st_mode) + ", not a regular file; refused");
    }
    // Regular files never block; clear the flag anyway so reads behave as usual.
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    *size = static_cast<uint64_t>(st.st_size);
    return fd;
}

namespace {

/// Reads up to n bytes (stops early at end of file).
std::string read_n(int fd, size_t n, const std::string& path, const std::string& what) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::read(fd, &out[got], n - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw FileError("cannot read " + what + " '" + path + "': " + std::strerror(errno));
        }
        if (r == 0) break;
        got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
}

}  // namespace

std::string describe_file_type(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
    uint64_t size = 0;
    Fd fd(open_regular_file(path, what, &size));
    if (size > max_bytes)
        throw FileError(what + " '" + path + "' is " + std::to_string(size) + " bytes, more than the " +
                        std::to_string(max_bytes) + " this reads; refused");
    std::string bytes = read_n(fd.get(), static_cast<size_t>(size), path, what);
    if (bytes.size() != size)
        throw FileError(what + " '" + path + "' changed while it was read (" + std::to_string(bytes.size()) + " of " +
                        std::to_string(size) + " bytes)");
    return bytes;
}

std::string read_file_head(const std::string& path, size_t n, const std::string& what, uint64_t* file_size) {
    uint64_t size = 0;
    Fd fd(open_regular_file(path, what, &size));
    if (file_size) *file_size = size;
    return read_n(fd.get(), static_cast<size_t>(std::min<uint64_t>(n, size)), path, what);
}

}  // namespace attnviz
