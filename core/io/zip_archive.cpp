// Zip's layout (APPNOTE.TXT): local header + data for each entry, then the
// central directory (one record per entry), then an optional ZIP64 end record and
// its locator, then the end-of-central-directory record (22 bytes + a comment).
// Every offset and size is checked against the archive's bytes in 64-bit
// arithmetic before it is used; sizes come from the central directory (torch
// writes its local headers with sizes 0 and a data descriptor after the data).
#include "core/io/zip_archive.hpp"

#include <algorithm>
#include <array>
#include <set>

#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz::zip {

namespace {

constexpr uint32_t k_local_sig = 0x04034b50, k_central_sig = 0x02014b50, k_end_sig = 0x06054b50,
                   k_end64_sig = 0x06064b50, k_locator_sig = 0x07064b50;
constexpr size_t k_end_size = 22, k_locator_size = 20, k_end64_size = 56, k_central_size = 46, k_local_size = 30;

uint64_t le(const char* p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
    return v;
}

class Reader {
public:
    Reader(std::string_view bytes, const std::string& name, const Limits& limits)
        : m_b(bytes), m_name(name), m_limits(limits) {}

    [[noreturn]] void fail(const std::string& what) const { throw FileError("'" + m_name + "' " + what); }

    /// n bytes at `at` as a little-endian number; `what` names the record for a truncation message.
    uint64_t num(uint64_t at, int n, const char* what) const {
        if (at > m_b.size() || static_cast<uint64_t>(n) > m_b.size() - at)
            fail(std::string("is truncated or damaged: its zip ") + what + " reaches past the end of the file");
        return le(m_b.data() + at, n);
    }

    std::vector<Entry> read() {
        find_end();
        if (m_count > m_limits.max_entries)
            fail("is a zip archive of " + std::to_string(m_count) + " entries, more than the " +
                 std::to_string(m_limits.max_entries) + " this reads");
        if (m_count > m_cd_size / k_central_size)
            fail("is damaged: its zip central directory of " + std::to_string(m_cd_size) + " bytes cannot hold " +
                 std::to_string(m_count) + " entries");
        std::vector<Entry> entries;
        std::vector<std::pair<uint64_t, uint64_t>> spans;  // [local header, end of data) per entry
        std::set<std::string> names;
        entries.reserve(static_cast<size_t>(m_count));
        uint64_t at = m_cd_offset;
        const uint64_t cd_end = m_cd_offset + m_cd_size;
        for (uint64_t i = 0; i < m_count; ++i) {
            uint64_t header = 0;
            Entry e = central(at, cd_end, &header);
            if (!names.insert(e.name).second) fail("is damaged: its zip archive holds two entries named " + quote(e.name));
            spans.emplace_back(header, e.data_offset + e.size);
            entries.push_back(std::move(e));
        }
        if (at != cd_end)
            fail("is damaged: its zip central directory has " + std::to_string(cd_end - at) +
                 " bytes after its last entry");
        std::sort(spans.begin(), spans.end());
        for (size_t i = 1; i < spans.size(); ++i)
            if (spans[i].first < spans[i - 1].second)
                fail("is damaged or hostile: two of its zip entries overlap (at byte " + std::to_string(spans[i].first) +
                     ")");
        return entries;
    }

private:
    /// Finds the end record (and the ZIP64 one); sets m_count, m_cd_offset, m_cd_size.
    void find_end() {
        const uint64_t size = m_b.size();
        if (size < k_end_size)
            fail("is not a zip archive or is truncated: " + std::to_string(size) +
                 " bytes, fewer than a zip end record takes");
        // The record is the last thing in the file but for its comment (up to 65,535 bytes).
        uint64_t end = 0;
        bool found = false;
        const uint64_t lowest = size - k_end_size > 0xffff ? size - k_end_size - 0xffff : 0;
        for (uint64_t p = size - k_end_size + 1; p-- > lowest;) {
            if (le(m_b.data() + p, 4) == k_end_sig && p + k_end_size + le(m_b.data() + p + 20, 2) == size) {
                end = p;
                found = true;
                break;
            }
        }
        if (!found) fail("is truncated or not a zip archive: it has no zip end-of-central-directory record");
        const uint64_t disk = num(end + 4, 2, "end record"), cd_disk = num(end + 6, 2, "end record");
        uint64_t here = num(end + 8, 2, "end record");
        m_count = num(end + 10, 2, "end record");
        m_cd_size = num(end + 12, 4, "end record");
        m_cd_offset = num(end + 16, 4, "end record");
        uint64_t cd_limit = end;  // the central directory ends where the next record starts
        if (end >= k_locator_size && le(m_b.data() + end - k_locator_size, 4) == k_locator_sig) {
            const uint64_t loc = end - k_locator_size;
            const uint64_t end64 = num(loc + 8, 8, "ZIP64 locator");
            if (num(loc + 4, 4, "ZIP64 locator") != 0 || num(loc + 16, 4, "ZIP64 locator") > 1)
                fail("is a zip archive split over several disks; refused");
            if (end64 > loc || loc - end64 < k_end64_size || num(end64, 4, "ZIP64 end record") != k_end64_sig)
                fail("is damaged: its ZIP64 locator points at no ZIP64 end record");
            const uint64_t record = num(end64 + 4, 8, "ZIP64 end record");
            if (record < k_end64_size - 12 || record > loc - end64 - 12)
                fail("is damaged: its ZIP64 end record's size (" + std::to_string(record) + ") is wrong");
            if (num(end64 + 16, 4, "ZIP64 end record") != 0 || num(end64 + 20, 4, "ZIP64 end record") != 0)
                fail("is a zip archive split over several disks; refused");
            here = num(end64 + 24, 8, "ZIP64 end record");
            const uint64_t count = num(end64 + 32, 8, "ZIP64 end record");
            const uint64_t cd_size = num(end64 + 40, 8, "ZIP64 end record");
            const uint64_t cd_offset = num(end64 + 48, 8, "ZIP64 end record");
            // Where the short record has a value of its own, both must say the same.
            if ((m_count != 0xffff && m_count != count) || (m_cd_size != 0xffffffff && m_cd_size != cd_size) ||
                (m_cd_offset != 0xffffffff && m_cd_offset != cd_offset))
                fail("is damaged: its zip end record and ZIP64 end record disagree");
            m_count = count;
            m_cd_size = cd_size;
            m_cd_offset = cd_offset;
            cd_limit = end64;
        } else if (disk != 0 || cd_disk != 0) {
            fail("is a zip archive split over several disks; refused");
        }
        if (here != m_count) fail("is a zip archive split over several disks; refused");
        if (m_cd_offset > cd_limit || m_cd_size > cd_limit - m_cd_offset)
            fail("is truncated or damaged: its zip central directory (" + std::to_string(m_cd_size) + " bytes at " +
                 std::to_string(m_cd_offset) + ") reaches past the end of the file");
    }

    /// Reads the central record at `at` (advanced past it) and checks its local header.
    Entry central(uint64_t& at, uint64_t cd_end, uint64_t* header) {
        if (at > cd_end || cd_end - at < k_central_size || le(m_b.data() + at, 4) != k_central_sig)
            fail("is damaged: its zip central directory is cut short or holds something else than entries");
        const uint64_t flags = le(m_b.data() + at + 8, 2), method = le(m_b.data() + at + 10, 2);
        const uint32_t crc = static_cast<uint32_t>(le(m_b.data() + at + 16, 4));
        uint64_t csize = le(m_b.data() + at + 20, 4), usize = le(m_b.data() + at + 24, 4);
        const uint64_t name_len = le(m_b.data() + at + 28, 2), extra_len = le(m_b.data() + at + 30, 2),
                       comment_len = le(m_b.data() + at + 32, 2), disk = le(m_b.data() + at + 34, 2);
        uint64_t offset = le(m_b.data() + at + 42, 4);
        const uint64_t record = k_central_size + name_len + extra_len + comment_len;
        if (record > cd_end - at) fail("is damaged: a zip central directory entry reaches past the directory");
        Entry e;
        e.name.assign(m_b.data() + at + k_central_size, static_cast<size_t>(name_len));
        const std::string who = "zip entry " + quote(e.name);
        if (e.name.empty() || e.name.find('\0') != std::string::npos)
            fail("is damaged: a zip entry has an empty name or a NUL in its name");
        // ZIP64 extra field: 64-bit values for exactly the fields saturated above, in this order.
        const uint64_t extra = at + k_central_size + name_len;
        for (uint64_t p = extra; p < extra + extra_len;) {
            if (extra + extra_len - p < 4) fail("is damaged: " + who + " has a cut extra field");
            const uint64_t id = le(m_b.data() + p, 2), len = le(m_b.data() + p + 2, 2);
            if (len > extra + extra_len - p - 4) fail("is damaged: " + who + " has an extra field past its record");
            if (id == 0x0001) {
                uint64_t q = p + 4;
                for (uint64_t* field : {&usize, &csize, &offset}) {
                    if (*field != 0xffffffff) continue;
                    if (q + 8 > p + 4 + len) fail("is damaged: " + who + " has a ZIP64 field too short for its sizes");
                    *field = le(m_b.data() + q, 8);
                    q += 8;
                }
            }
            p += 4 + len;
        }
        at += record;
        if (flags & 0x41) fail("holds an encrypted " + who + "; refused");
        if (method != 0)
            fail("holds a compressed " + who + " (zip method " + std::to_string(method) +
                 "); torch.save stores its entries uncompressed, so this reader refuses it");
        if (csize != usize) fail("is damaged: stored " + who + " has different compressed and uncompressed sizes");
        if (disk != 0) fail("is a zip archive split over several disks; refused");
        *header = offset;
        // The local header: same name and method; its data must end before the central directory.
        if (offset > m_cd_offset || m_cd_offset - offset < k_local_size || le(m_b.data() + offset, 4) != k_local_sig)
            fail("is damaged: " + who + " has no local header where the directory says (byte " + std::to_string(offset) +
                 ")");
        const uint64_t lflags = le(m_b.data() + offset + 6, 2), lmethod = le(m_b.data() + offset + 8, 2);
        const uint64_t lcsize = le(m_b.data() + offset + 18, 4), lusize = le(m_b.data() + offset + 22, 4);
        const uint64_t lname = le(m_b.data() + offset + 26, 2), lextra = le(m_b.data() + offset + 28, 2);
        const uint64_t data = offset + k_local_size + lname + lextra;
        if (data > m_cd_offset || size_t(lname) != e.name.size() ||
            std::string_view(m_b.data() + offset + k_local_size, static_cast<size_t>(lname)) != e.name)
            fail("is damaged: the local header of " + who + " does not match the central directory");
        if (lmethod != method || (lflags & 0x41)) fail("is damaged or hostile: the local header of " + who + " differs");
        // Without a data descriptor (flag 3) the local sizes are the real ones (or ZIP64's 0xffffffff).
        if (!(lflags & 0x8) && ((lcsize != 0xffffffff && lcsize != csize) || (lusize != 0xffffffff && lusize != usize)))
            fail("is damaged: the local header of " + who + " gives another size than the central directory");
        if (csize > m_cd_offset - data)
            fail("is truncated or damaged: " + who + " of " + std::to_string(csize) + " bytes at byte " +
                 std::to_string(data) + " reaches past the end of the entries");
        e.data_offset = data;
        e.size = csize;
        e.crc32 = crc;
        return e;
    }

    std::string_view m_b;
    const std::string& m_name;
    const Limits& m_limits;
    uint64_t m_count = 0, m_cd_offset = 0, m_cd_size = 0;
};

std::array<uint32_t, 256> crc_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
    return t;
}

}  // namespace

std::vector<Entry> read_stored_entries(std::string_view bytes, const std::string& name, const Limits& limits) {
    return Reader(bytes, name, limits).read();
}

bool looks_like_zip(std::string_view head) { return head.size() >= 4 && le(head.data(), 4) == k_local_sig; }

uint32_t crc32(std::string_view data) {
    static const std::array<uint32_t, 256> table = crc_table();
    uint32_t c = 0xffffffffu;
    for (const char ch : data) c = table[(c ^ static_cast<unsigned char>(ch)) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

}  // namespace attnviz::zip
