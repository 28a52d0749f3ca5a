// The restricted unpickler of core/io/torch_bin.hpp. Objects live in flat arrays
// (values of 16 bytes, one text buffer, one array of tuple items) and refer to
// each other by index: nothing recurses, so a hostile nesting cannot overflow the
// C++ stack, and every array is bounded by Limits::max_values. A "global" is only
// a tag for one of the few names allowed; REDUCE of such a tag builds a record.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <unordered_map>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/io/torch_bin_internal.hpp"

namespace attnviz::torch_bin::detail {

namespace {

enum class Kind : uint8_t { none, boolean, integer, string, tuple, list, dict, global, storage, tensor };
enum class Global : uint8_t { ordered_dict, rebuild_tensor_v2, rebuild_parameter, storage_type };

struct Value {
    Kind kind = Kind::none;
    uint8_t depth = 0;   // containers inside containers
    uint8_t tag = 0;     // global: Global; with storage_type, dtype in `number`
    uint32_t ref = 0;    // string: offset in text; tuple: first item; list/dict: index of its items
    int64_t number = 0;  // integer, boolean, string length, tuple size, storage/tensor index
};

struct AllowedGlobal {
    const char* module;
    const char* name;
    Global global;
    DType dtype;
};
const AllowedGlobal k_globals[] = {
    {"collections", "OrderedDict", Global::ordered_dict, DType::F32},
    {"torch._utils", "_rebuild_tensor_v2", Global::rebuild_tensor_v2, DType::F32},
    {"torch._utils", "_rebuild_parameter", Global::rebuild_parameter, DType::F32},
    {"torch", "FloatStorage", Global::storage_type, DType::F32},
    {"torch", "HalfStorage", Global::storage_type, DType::F16},
    {"torch", "BFloat16Storage", Global::storage_type, DType::BF16},
    {"torch", "DoubleStorage", Global::storage_type, DType::F64},
    {"torch", "LongStorage", Global::storage_type, DType::I64},
    {"torch", "IntStorage", Global::storage_type, DType::I32},
    {"torch", "ShortStorage", Global::storage_type, DType::I16},
    {"torch", "CharStorage", Global::storage_type, DType::I8},
    {"torch", "ByteStorage", Global::storage_type, DType::U8},
    {"torch", "BoolStorage", Global::storage_type, DType::BOOL},
};

const char* kind_name(Kind k) {
    switch (k) {
    case Kind::none: return "None";
    case Kind::boolean: return "a bool";
    case Kind::integer: return "an integer";
    case Kind::string: return "a string";
    case Kind::tuple: return "a tuple";
    case Kind::list: return "a list";
    case Kind::dict: return "a dict";
    case Kind::global: return "a class or function";
    case Kind::storage: return "a storage";
    case Kind::tensor: return "a tensor";
    }
    return "an object";
}

class Unpickler {
public:
    Unpickler(std::string_view pickle, const std::string& file, const Limits& limits)
        : m_p(pickle), m_file(file), m_limits(limits),
          // Indices are 32-bit and depths 8-bit: limits beyond those are cut to them.
          m_max_values(std::min<size_t>(limits.max_values, size_t(1) << 30)),
          m_max_nesting(std::min(limits.max_nesting, 200)) {
        // Shared constants: None, False, True cost nothing however often they come.
        m_values.push_back({Kind::none, 0, 0, 0, 0});
        m_values.push_back({Kind::boolean, 0, 0, 0, 0});
        m_values.push_back({Kind::boolean, 0, 0, 0, 1});
    }

    [[noreturn]] void fail(const std::string& what) const {
        throw FileError("'" + m_file + "' " + what + " (data.pkl, byte " + std::to_string(m_op) + ")");
    }

    PickledStateDict run();

private:
    // ---- reading bytes
    uint64_t take(size_t n) {
        if (m_p.size() - m_at < n) fail("is truncated or damaged: its pickle ends in the middle of an instruction");
        uint64_t v = 0;
        for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(m_p[m_at + i])) << (8 * i);
        m_at += n;
        return v;
    }
    std::string_view take_bytes(uint64_t n) {
        if (m_p.size() - m_at < n) fail("is truncated or damaged: a string of " + std::to_string(n) + " bytes reaches past its pickle");
        const std::string_view s = m_p.substr(m_at, static_cast<size_t>(n));
        m_at += static_cast<size_t>(n);
        return s;
    }
    std::string_view take_line() {
        const size_t end = m_p.find('\n', m_at);
        if (end == std::string_view::npos || end - m_at > 200) fail("is damaged: a GLOBAL name is not a short line");
        const std::string_view s = m_p.substr(m_at, end - m_at);
        m_at = end + 1;
        return s;
    }

    // ---- values
    void count(size_t n = 1) {
        m_count += n;
        if (m_count > m_max_values)
            fail("makes the unpickler build more than the " + std::to_string(m_max_values) + " objects this reads");
    }
    uint32_t add(Value v) {
        count();
        m_values.push_back(v);
        return static_cast<uint32_t>(m_values.size() - 1);
    }
    void push(uint32_t v) {
        count();
        m_stack.push_back(v);
    }
    uint32_t pop() {
        if (m_stack.size() <= (m_marks.empty() ? 0 : m_marks.back())) fail("is damaged: its pickle pops an empty stack");
        const uint32_t v = m_stack.back();
        m_stack.pop_back();
        return v;
    }
    uint32_t& top() {
        if (m_stack.size() <= (m_marks.empty() ? 0 : m_marks.back())) fail("is damaged: its pickle uses an empty stack");
        return m_stack.back();
    }
    /// The items above the last MARK, which is dropped.
    std::vector<uint32_t> pop_mark() {
        if (m_marks.empty()) fail("is damaged: its pickle has no MARK where one is needed");
        std::vector<uint32_t> items(m_stack.begin() + static_cast<std::ptrdiff_t>(m_marks.back()), m_stack.end());
        m_stack.resize(m_marks.back());
        m_marks.pop_back();
        return items;
    }
    const Value& at(uint32_t v) const { return m_values[v]; }
    std::string_view text(const Value& v) const { return std::string_view(m_text).substr(v.ref, static_cast<size_t>(v.number)); }
    uint8_t deeper(uint8_t depth, uint32_t child) const {
        const int d = std::max<int>(depth, at(child).depth + 1);
        if (d > m_max_nesting) fail("nests containers more than " + std::to_string(m_max_nesting) + " deep");
        return static_cast<uint8_t>(d);
    }
    uint32_t tuple(const std::vector<uint32_t>& items) {
        count(items.size());
        Value v{Kind::tuple, 0, 0, static_cast<uint32_t>(m_items.size()), static_cast<int64_t>(items.size())};
        for (const uint32_t i : items) v.depth = deeper(v.depth, i);
        m_items.insert(m_items.end(), items.begin(), items.end());
        return add(v);
    }
    std::vector<uint32_t> tuple_items(const Value& v) const {
        return {m_items.begin() + v.ref, m_items.begin() + v.ref + v.number};
    }
    uint32_t container(Kind kind) {
        count(3);  // its own item array: counted as more than a plain value
        m_containers.emplace_back();
        return add({kind, 0, 0, static_cast<uint32_t>(m_containers.size() - 1), 0});
    }
    void extend(uint32_t target, Kind kind, const std::vector<uint32_t>& items, const char* op) {
        Value& c = m_values[target];
        if (c.kind != kind) fail(std::string("uses ") + op + " on " + kind_name(c.kind) + ", which torch.save never does");
        if (kind == Kind::dict && items.size() % 2) fail("is damaged: its pickle gives a dict key without a value");
        uint8_t depth = c.depth;
        for (const uint32_t i : items) depth = deeper(depth, i);
        m_values[target].depth = depth;
        auto& dst = m_containers[m_values[target].ref];
        dst.insert(dst.end(), items.begin(), items.end());
    }
    int64_t integer(uint32_t v, const char* what) const {
        if (at(v).kind != Kind::integer) fail(std::string("gives ") + what + " as " + kind_name(at(v).kind) + ", expected an integer");
        if (at(v).number < 0) fail(std::string("gives a negative ") + what + " (" + std::to_string(at(v).number) + ")");
        return at(v).number;
    }
    bool empty_dict(uint32_t v) const { return at(v).kind == Kind::dict && m_containers[at(v).ref].empty(); }

    // ---- opcodes that need more than a line
    void op_global(std::string_view module, std::string_view name);
    void op_persistent_id();
    void op_reduce();
    uint32_t rebuild_tensor(const std::vector<uint32_t>& args);
    PickledStateDict result();

    std::string_view m_p;
    const std::string& m_file;
    const Limits& m_limits;
    const size_t m_max_values;
    const int m_max_nesting;
    size_t m_at = 0, m_op = 0, m_count = 0;
    std::vector<Value> m_values;
    std::vector<uint32_t> m_stack, m_items;
    std::vector<size_t> m_marks;
    std::vector<std::vector<uint32_t>> m_containers;
    std::string m_text;
    std::unordered_map<uint32_t, uint32_t> m_memo;
    PickledStateDict m_out;
    std::unordered_map<std::string, size_t> m_storage_index;
};

void Unpickler::op_global(std::string_view module, std::string_view name) {
    for (const auto& g : k_globals)
        if (module == g.module && name == g.name) {
            push(add({Kind::global, 0, static_cast<uint8_t>(g.global), 0, static_cast<int64_t>(g.dtype)}));
            return;
        }
    fail("names the Python global " + quote(std::string(module) + "." + std::string(name), 100) +
         ", which this reader refuses: it reads state_dicts of tensors only (collections.OrderedDict, "
         "torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter, torch's storage types) and never "
         "calls anything a file names");
}

void Unpickler::op_persistent_id() {
    const Value& pid = at(pop());
    const auto items = pid.kind == Kind::tuple ? tuple_items(pid) : std::vector<uint32_t>{};
    if (items.size() != 5 || at(items[0]).kind != Kind::string || text(at(items[0])) != "storage" ||
        at(items[1]).kind != Kind::global || at(items[1]).tag != static_cast<uint8_t>(Global::storage_type) ||
        at(items[2]).kind != Kind::string || at(items[3]).kind != Kind::string)
        fail("holds a persistent id that is not a torch storage ('storage', type, key, location, size)");
    const DType dtype = static_cast<DType>(at(items[1]).number);
    const std::string key(text(at(items[2])));
    if (key.empty() || key.size() > 64 || key.find('/') != std::string::npos || key.find('\0') != std::string::npos)
        fail("names a storage " + quote(key) + " that is not a record name");
    const uint64_t numel = static_cast<uint64_t>(integer(items[4], "storage size"));
    if (numel > std::numeric_limits<uint64_t>::max() / 8) fail("gives storage " + quote(key) + " an impossible size");
    const auto [it, fresh] = m_storage_index.emplace(key, m_out.storages.size());
    if (fresh) {
        m_out.storages.push_back({key, dtype, numel});
    } else if (m_out.storages[it->second].dtype != dtype || m_out.storages[it->second].numel != numel) {
        fail("names storage " + quote(key) + " twice with different types or sizes");
    }
    push(add({Kind::storage, 0, 0, 0, static_cast<int64_t>(it->second)}));
}

uint32_t Unpickler::rebuild_tensor(const std::vector<uint32_t>& args) {
    if ((args.size() != 6 && args.size() != 7) || at(args[0]).kind != Kind::storage)
        fail("calls _rebuild_tensor_v2 with other arguments than torch.save gives it");
    const PickledStorage& storage = m_out.storages[static_cast<size_t>(at(args[0]).number)];
    TensorRecord t;
    t.storage = static_cast<size_t>(at(args[0]).number);
    t.dtype = storage.dtype;
    t.storage_offset = integer(args[1], "storage offset");
    for (const int k : {2, 3})
        if (at(args[k]).kind != Kind::tuple) fail("gives a tensor's sizes or strides as " + std::string(kind_name(at(args[k]).kind)));
    const auto size = tuple_items(at(args[2])), stride = tuple_items(at(args[3]));
    if (size.size() != stride.size()) fail("gives a tensor " + std::to_string(size.size()) + " sizes but " + std::to_string(stride.size()) + " strides");
    if (size.size() > m_limits.max_rank)
        fail("gives a tensor " + std::to_string(size.size()) + " dimensions, more than the " + std::to_string(m_limits.max_rank) + " this reads");
    uint64_t numel = 1, last = 0;  // elements, and the farthest element from the offset
    bool overflow = false;
    for (size_t i = 0; i < size.size(); ++i) {
        const int64_t s = integer(size[i], "tensor size"), st = integer(stride[i], "tensor stride");
        t.shape.push_back(s);
        t.strides.push_back(st);
        uint64_t reach = 0;
        overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(s), &numel);
        if (s > 0) overflow |= __builtin_mul_overflow(static_cast<uint64_t>(s - 1), static_cast<uint64_t>(st), &reach) ||
                               __builtin_add_overflow(last, reach, &last);
    }
    const uint64_t offset = static_cast<uint64_t>(t.storage_offset);
    uint64_t end = 0;  // one past the last element used
    overflow |= __builtin_add_overflow(offset, numel > 0 ? last + 1 : 0, &end) || numel > uint64_t(INT64_MAX);
    if (overflow || end > storage.numel)
        fail("has a tensor of shape " + shape_to_string(t.shape) + ", strides " + shape_to_string(t.strides) + " and offset " +
             std::to_string(offset) + " that reaches past its storage " + quote(storage.key) + " of " +
             std::to_string(storage.numel) + " elements");
    if (at(args[4]).kind != Kind::boolean) fail("gives a tensor's requires_grad as " + std::string(kind_name(at(args[4]).kind)));
    t.requires_grad = at(args[4]).number != 0;
    // Backward hooks and tensor metadata: torch.save writes empty dicts (anything else would be code).
    if (!empty_dict(args[5]) || (args.size() == 7 && !empty_dict(args[6])))
        fail("gives a tensor backward hooks or metadata, which a state_dict does not have");
    m_out.tensors.push_back(std::move(t));
    return add({Kind::tensor, 0, 0, 0, static_cast<int64_t>(m_out.tensors.size() - 1)});
}

void Unpickler::op_reduce() {
    const uint32_t args_v = pop(), callable = pop();
    if (at(callable).kind != Kind::global) fail("calls " + std::string(kind_name(at(callable).kind)) + ", which torch.save never does");
    if (at(args_v).kind != Kind::tuple) fail("gives a call its arguments as " + std::string(kind_name(at(args_v).kind)));
    const auto args = tuple_items(at(args_v));
    switch (static_cast<Global>(at(callable).tag)) {
    case Global::ordered_dict:
        if (!args.empty()) fail("calls OrderedDict with arguments, which torch.save never does");
        push(container(Kind::dict));
        return;
    case Global::rebuild_tensor_v2: push(rebuild_tensor(args)); return;
    case Global::rebuild_parameter: {
        if (args.size() != 3 || at(args[0]).kind != Kind::tensor || at(args[1]).kind != Kind::boolean || !empty_dict(args[2]))
            fail("calls _rebuild_parameter with other arguments than torch.save gives it");
        TensorRecord t = m_out.tensors[static_cast<size_t>(at(args[0]).number)];
        t.requires_grad = at(args[1]).number != 0;
        m_out.tensors.push_back(std::move(t));
        push(add({Kind::tensor, 0, 0, 0, static_cast<int64_t>(m_out.tensors.size() - 1)}));
        return;
    }
    case Global::storage_type: break;
    }
    fail("calls a storage type, which torch.save never does");
}

PickledStateDict Unpickler::run() {
    if (m_p.size() >= 4 && m_p.substr(0, 4) == std::string_view("PK\x03\x04", 4))
        fail("holds a zip archive where its pickle should be (a nested zip); refused");
    for (;;) {
        m_op = m_at;
        const auto op = static_cast<unsigned char>(take(1));
        switch (op) {
        case 0x80: {  // PROTO
            const uint64_t v = take(1);
            if (v < 2 || v > 5) fail("is a pickle of protocol " + std::to_string(v) + "; torch.save writes 2 to 5");
            break;
        }
        case 0x95: {  // FRAME: a length hint, nothing to do but check it
            const uint64_t n = take(8);
            if (n > m_p.size() - m_at) fail("is truncated: a pickle frame reaches past its end");
            break;
        }
        case '.': return result();  // STOP
        case '(':
            if (static_cast<int>(m_marks.size()) >= m_max_nesting)
                fail("opens more than " + std::to_string(m_max_nesting) + " MARKs at once");
            m_marks.push_back(m_stack.size());
            break;
        case '0': pop(); break;  // POP
        case 'N': push(0); break;
        case 0x89: push(1); break;  // NEWFALSE
        case 0x88: push(2); break;  // NEWTRUE
        case 'J': push(add({Kind::integer, 0, 0, 0, static_cast<int32_t>(static_cast<uint32_t>(take(4)))})); break;
        case 'K': push(add({Kind::integer, 0, 0, 0, static_cast<int64_t>(take(1))})); break;
        case 'M': push(add({Kind::integer, 0, 0, 0, static_cast<int64_t>(take(2))})); break;
        case 0x8a: {  // LONG1: n bytes, little-endian two's complement
            const size_t n = static_cast<size_t>(take(1));
            if (n > 8) fail("holds an integer of " + std::to_string(n) + " bytes, more than 64 bits");
            uint64_t v = n ? take(n) : 0;
            if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);  // sign extension
            push(add({Kind::integer, 0, 0, 0, static_cast<int64_t>(v)}));
            break;
        }
        case 'X':
        case 0x8c: {  // BINUNICODE, SHORT_BINUNICODE
            const std::string_view s = take_bytes(take(op == 'X' ? 4 : 1));
            push(add({Kind::string, 0, 0, static_cast<uint32_t>(m_text.size()), static_cast<int64_t>(s.size())}));
            m_text += s;
            break;
        }
        case ')': push(tuple({})); break;
        case 't': push(tuple(pop_mark())); break;
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
            std::vector<uint32_t> items(op - 0x84);
            for (size_t i = items.size(); i-- > 0;) items[i] = pop();
            push(tuple(items));
            break;
        }
        case ']': push(container(Kind::list)); break;
        case '}': push(container(Kind::dict)); break;
        case 'a': {
            const uint32_t item = pop();
            extend(top(), Kind::list, {item}, "APPEND");
            break;
        }
        case 'e': {
            const auto items = pop_mark();
            extend(top(), Kind::list, items, "APPENDS");
            break;
        }
        case 's': {
            const uint32_t value = pop(), key = pop();
            extend(top(), Kind::dict, {key, value}, "SETITEM");
            break;
        }
        case 'u': {
            const auto items = pop_mark();
            extend(top(), Kind::dict, items, "SETITEMS");
            break;
        }
        case 'q':
        case 'r':
        case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
            const uint32_t index = op == 0x94 ? static_cast<uint32_t>(m_memo.size()) : static_cast<uint32_t>(take(op == 'q' ? 1 : 4));
            if (m_memo.size() >= m_limits.max_memo && !m_memo.count(index))
                fail("memoises more than the " + std::to_string(m_limits.max_memo) + " objects this reads");
            m_memo[index] = top();
            break;
        }
        case 'h':
        case 'j': {  // BINGET, LONG_BINGET
            const auto index = static_cast<uint32_t>(take(op == 'h' ? 1 : 4));
            const auto it = m_memo.find(index);
            if (it == m_memo.end()) fail("is damaged: its pickle gets memo entry " + std::to_string(index) + ", which was never put");
            push(it->second);
            break;
        }
        case 'c': {
            const std::string_view module = take_line();
            op_global(module, take_line());
            break;
        }
        case 0x93: {  // STACK_GLOBAL
            const uint32_t name = pop(), module = pop();
            if (at(name).kind != Kind::string || at(module).kind != Kind::string) fail("is damaged: STACK_GLOBAL without two strings");
            op_global(text(at(module)), text(at(name)));
            break;
        }
        case 'Q': op_persistent_id(); break;
        case 'R': op_reduce(); break;
        case 'b': {  // BUILD: state_dict's _metadata on the OrderedDict (ignored), nothing else
            const uint32_t state = pop();
            if (at(top()).kind != Kind::dict || (at(state).kind != Kind::dict && at(state).kind != Kind::none))
                fail("sets the state of " + std::string(kind_name(at(top()).kind)) + ", which torch.save never does for a state_dict");
            break;
        }
        default: {
            const std::string shown = op >= 0x20 && op < 0x7f ? " ('" + std::string(1, static_cast<char>(op)) + "')" : "";
            static const char* hex = "0123456789abcdef";
            fail(std::string("holds the pickle opcode 0x") + hex[op >> 4] + hex[op & 15] + shown +
                 ", which torch.save does not write for a state_dict");
        }
        }
    }
}

PickledStateDict Unpickler::result() {
    if (m_at != m_p.size()) fail("has " + std::to_string(m_p.size() - m_at) + " bytes after the end of its pickle");
    if (!m_marks.empty() || m_stack.size() != 1) fail("is damaged: its pickle ends with " + std::to_string(m_stack.size()) + " objects on its stack");
    const Value& top_value = at(m_stack.back());
    if (top_value.kind != Kind::dict)
        fail("holds " + std::string(kind_name(top_value.kind)) + ", not a state_dict (a dict of names and tensors)");
    const auto& items = m_containers[top_value.ref];
    if (items.size() / 2 > m_limits.max_tensors)
        fail("holds " + std::to_string(items.size() / 2) + " tensors, more than the " + std::to_string(m_limits.max_tensors) + " this reads");
    PickledStateDict out;
    out.storages = std::move(m_out.storages);
    std::set<std::string_view> names;
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
        const Value& key = at(items[i]);
        const Value& value = at(items[i + 1]);
        if (key.kind != Kind::string) fail("holds a state_dict key that is " + std::string(kind_name(key.kind)) + ", not a string");
        const std::string_view name = text(key);
        if (value.kind != Kind::tensor)
            fail("holds " + quote(name) + ", which is " + kind_name(value.kind) +
                 ", not a tensor: this reads state_dicts (name -> tensor) such as pytorch_model.bin");
        if (!names.insert(name).second) fail("names tensor " + quote(name) + " twice");
        TensorRecord t = m_out.tensors[static_cast<size_t>(value.number)];
        t.name = std::string(name);
        out.tensors.push_back(std::move(t));
    }
    return out;
}

}  // namespace

PickledStateDict unpickle_state_dict(std::string_view pickle, const std::string& file, const Limits& limits) {
    if (pickle.size() > limits.max_pickle_bytes)
        throw FileError("'" + file + "' has a data.pkl of " + std::to_string(pickle.size()) + " bytes, more than the " +
                        std::to_string(limits.max_pickle_bytes) + " this reads");
    if (pickle.size() > std::numeric_limits<uint32_t>::max() / 2)
        throw FileError("'" + file + "' has a data.pkl too large to read");
    return Unpickler(pickle, file, limits).run();
}

}  // namespace attnviz::torch_bin::detail
