#pragma once
// TensorBoard event files, written without TensorFlow or protobuf: the record
// framing (TFRecord) and the few protobuf messages TensorBoard reads (Event,
// Summary, its image, tensor and plugin metadata), encoded by hand in the protobuf
// wire format. Torch-free and Qt-free; what a training run logs is
// core/train/tensorboard_log.hpp.
//
// A record is: the data's length (uint64, little-endian), the masked CRC-32C of those
// 8 bytes, the data, the masked CRC-32C of the data (core/io/crc32c.hpp). An event
// file starts with an Event whose file_version is "brain.Event:2"; each later Event
// has wall_time, step and a Summary with one value. TensorBoard reads every file of a
// directory whose name contains "tfevents", in name order, as one run.
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz::tensorboard {

/// One TFRecord around data (see above).
std::string frame_record(const std::string& data);

/// Event messages (TensorFlow's event.proto and summary.proto, the fields TensorBoard reads).
std::string file_version_event(double wall_time);
/// Summary.Value.simple_value (a float: TensorBoard's scalars are 32-bit).
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, double value);
/// Summary.Value.image: an encoded image (PNG) and its size; colourspace 3 (RGB).
std::string image_event(double wall_time, int64_t step, const std::string& tag, const std::string& png, int width,
                        int height);
/// Summary.Value.tensor: a string tensor of shape [rows, columns] with the text plugin's
/// metadata, which TensorBoard's Text tab shows as a table (each cell Markdown). Rows of
/// different lengths are padded with empty cells. A table of one cell is written as a
/// scalar string (shown as one Markdown text). Throws ConfigError for an empty table.
std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const std::vector<std::vector<std::string>>& table);

/// Text shown literally by the Text tab's Markdown (Python-Markdown with tables, then an HTML
/// sanitiser): \ ` * _ { } [ ] ( ) # + - . ! | are escaped with a backslash, < > & become
/// entities (a raw "<eos>" would be dropped as an unknown tag), line breaks become spaces.
std::string markdown_literal(const std::string& text);

/// "events.out.tfevents.<seconds, 10 digits>.<host>.<pid>.<n>", as TensorFlow names its files.
std::string event_file_name(double wall_time, const std::string& host, long pid, int n);

/// Seconds since the epoch, as TensorBoard's wall_time.
double wall_time_now();

/// Appends events to a new event file of a directory. Not thread-safe: one thread writes.
class EventWriter {
public:
    /// Creates dir (and its parents) and a new event file in it (never an existing one:
    /// O_EXCL), and queues the file_version event. Throws FileError naming the path and why.
    explicit EventWriter(const std::string& dir);
    ~EventWriter();  ///< flushes what is queued, ignoring errors
    EventWriter(const EventWriter&) = delete;
    EventWriter& operator=(const EventWriter&) = delete;

    void scalar(const std::string& tag, int64_t step, double value);
    void image(const std::string& tag, int64_t step, const std::string& png, int width, int height);
    void text(const std::string& tag, int64_t step, const std::vector<std::vector<std::string>>& table);
    /// Writes the queued events to the file (they are queued until then, or until a megabyte
    /// is queued). Throws FileError; after a failure the writer drops every later event,
    /// since a partly written record would make TensorBoard stop reading at it.
    void flush();

    const std::string& path() const { return m_path; }
    /// Bytes queued and not written yet.
    size_t queued() const { return m_queue.size(); }

private:
    void add(const std::string& event);
    int m_fd = -1;
    bool m_failed = false;
    std::string m_path;
    std::string m_queue;
};

}  // namespace attnviz::tensorboard
