// prep_data's reader thread: reads the input files in order (decompressing them, opening tar archives), cuts
// them into records (documents or JSON lines), numbers them, gives each its split, and submits them to the
// Pipeline in batches. On a resume it starts at the file holding the first document still needed.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/text_encoding.h"  // utf16_or_32
#include "tools/prep_data/prep_data.h"

namespace prep {

// Which split the record with this index goes to. Deterministic: a function of the index and the options.
static int split_of(const Options& o, int64_t index, int src) {
    if (!o.val_inputs.empty()) return src;
    if (o.val_docs > 0) return index < o.val_docs ? VAL : TRAIN;
    if (o.val_fraction > 0) {
        uint64_t h = mix64(o.val_seed + (uint64_t)(index + 1) * GOLDEN);
        return (double)(h >> 11) * 0x1.0p-53 < o.val_fraction ? VAL : TRAIN;
    }
    return TRAIN;
}

void Reader::submit() {
    if (cur && (!cur->recs.empty() || !cur->file_starts.empty())) pipe->submit(std::move(cur));
    cur = std::make_unique<Batch>();
    cur_bytes = 0;
}

// Numbers the next record; false when it is not wanted (already in the shards of a resumed run).
bool Reader::begin_record(int src, int64_t* idx, int* split) {
    if (o.max_docs > 0 && src_base[src] >= 0 && index - src_base[src] >= o.max_docs) throw EndOfSource();
    *idx = index++;
    *split = split_of(o, *idx, src);
    return *idx >= emit_from && *idx >= want_from[*split];
}

void Reader::emit(int64_t idx, int split, bool is_json, int64_t line, const Where& where, std::string&& data) {
    cur_bytes += data.size() + 64;
    cur->recs.push_back(Record{idx, split, is_json, line, where, std::move(data)});
    if ((int)cur->recs.size() >= o.batch_docs || cur_bytes >= (8u << 20)) submit();
}

void Reader::run(Pipeline& p) {
    pipe = &p;
    cur = std::make_unique<Batch>();
    index = start_index;
    try {
        for (size_t i = 0; i < files.size(); i++) {
            const InputFile& f = files[i];
            if (i < start_file) {
                ctr.bytes_read += (uint64_t)f.size;
                continue;
            }
            if (f.split_src == TRAIN && src_base[TRAIN] < 0) src_base[TRAIN] = index;
            if (o.max_docs > 0 && index - src_base[f.split_src] >= o.max_docs) {
                ctr.bytes_read += (uint64_t)f.size;  // this source is full
                continue;
            }
            cur->file_starts.push_back({(int)i, index});
            uint64_t before = ctr.bytes_read.load();
            try {
                read_file(f);
            } catch (const EndOfSource&) {
            }
            // Account the whole file, also when --max-docs stopped early.
            uint64_t got = ctr.bytes_read.load() - before;
            if (got < (uint64_t)f.size) ctr.bytes_read += (uint64_t)f.size - got;
        }
    } catch (...) {
        submit();  // the records before the error are good: they are written before it is reported
        throw;
    }
    submit();
}

void Reader::read_file(const InputFile& f) {
    FileType t = classify(f.path);
    auto where = std::make_shared<const std::string>(f.path);
    if (t.kind == KIND_TEXT && o.doc_sep == "file") {
        int64_t idx;
        int split;
        if (!begin_record(f.split_src, &idx, &split)) return;  // not even opened
    }
    FileSource file(f.path, &ctr.bytes_read);
    auto dec = make_decoder(t.codec, file, f.path);
    ByteSource& src = dec ? *dec : file;
    read_kind(t.kind, src, where, f.split_src, 0);
}

// Reads one file or archive entry of a known kind.
void Reader::read_kind(Kind k, ByteSource& src, const Where& where, int split_src, int depth) {
    if (k == KIND_TEXT) read_text(src, where, split_src);
    else if (k == KIND_JSONL) read_jsonl(src, where, split_src);
    else if (k == KIND_TAR) read_tar(src, where, split_src, depth);
}

// A file's first bytes in UTF-16 or UTF-32 (common/text_encoding.h) are refused: read as UTF-8 they are one document
// of NUL-separated characters. A UTF-8 byte order mark is dropped from a text file (Python's "utf-8-sig"; JSON
// lines' parser skips it itself).
static void refuse_utf16_or_32(const std::string& head, const std::string& where) {
    const TextEncoding e = utf16_or_32(head);
    if (*e.name)
        fail("%s: this looks like UTF-16 or UTF-32 text (%s), not UTF-8\n---> HINT: convert it: iconv -f UTF-16 -t "
             "UTF-8 FILE > FILE.utf8.txt (UTF-32 likewise)", where.c_str(), e.why);
}
static void drop_utf8_bom(std::string& s) {
    if (s.compare(0, 3, "\xef\xbb\xbf") == 0) s.erase(0, 3);
}

void Reader::read_text(ByteSource& src, const Where& where, int split_src) {
    if (o.doc_sep == "file") {
        // The caller numbered this record (begin_record) before opening it, so that a record a resume
        // does not need is not even read; it is wanted.
        int64_t idx = index - 1;
        std::string text = read_all(src, *where);
        refuse_utf16_or_32(text, *where);
        drop_utf8_bom(text);
        emit(idx, split_of(o, idx, split_src), false, 0, where, std::move(text));
        return;
    }
    LineReader lines(src, *where);
    std::string read, para;
    int64_t start_line = 0, n = 0;
    bool open = false;
    auto flush = [&] {
        if (!open) return;
        int64_t idx;
        int split;
        if (begin_record(split_src, &idx, &split)) emit(idx, split, false, start_line, where, std::move(para));
        para.clear();
        open = false;
    };
    auto take = [&](const std::string& line) {
        n++;
        if (is_blank(line)) return flush();
        if (open) para += '\n';
        else start_line = n, open = true;
        para += line;
    };
    // lines end at LF, CRLF or a lone CR (Python's universal newlines: a classic Mac file was one document)
    auto split_cr = [&](std::string& line) {
        if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF
        if (line.find('\r') == std::string::npos) return take(line);
        for (size_t a = 0, b; a <= line.size(); a = b + 1) {
            b = std::min(line.find('\r', a), line.size());
            take(line.substr(a, b - a));
        }
    };
    // The encoding is judged on the file's first 4 KiB, not its first line: UTF-16's "Hi\n" is a 6-byte line
    // ("H\0i\0\n" and the NUL after it starts the next), too short to judge, and the file was read as UTF-8
    // (a document of NUL-separated characters, exit 0). The lines are held until then.
    std::vector<std::string> head_lines;
    size_t head_bytes = 0;
    bool judged = false;
    auto judge = [&] {
        std::string head;  // (the first 4 KiB: a long line is not copied whole)
        for (size_t i = 0; i < head_lines.size() && head.size() < 4096; i++)
            head.append(head_lines[i], 0, 4096 - head.size()).append(1, '\n');
        refuse_utf16_or_32(head, *where);
        judged = true;
        if (!head_lines.empty()) drop_utf8_bom(head_lines[0]);
        for (std::string& l : head_lines) split_cr(l);
        head_lines.clear();
    };
    while (lines.next(read)) {
        if (judged) {
            split_cr(read);
            continue;
        }
        head_bytes += read.size() + 1;
        head_lines.push_back(std::move(read));
        if (head_bytes >= 4096) judge();
    }
    if (!judged) judge();
    flush();
}

void Reader::read_jsonl(ByteSource& src, const Where& where, int split_src) {
    LineReader lines(src, *where);
    std::string line;
    int64_t n = 0;
    bool first = true;
    while (lines.next(line)) {
        n++;
        if (n == 1) refuse_utf16_or_32(line, *where);
        size_t p = line.find_first_not_of(" \t\r");
        if (p == std::string::npos) continue;  // blank lines are not records
        if (first && line[p] == '[')
            fail("%s: a JSON array, not JSON lines (one object per line)\n---> HINT: convert it: "
                 "jq -c '.[]' FILE > FILE.jsonl", where->c_str());
        // a line that is only "{" is no record: an object written over several lines (pretty-printed)
        if (first && line.find_last_not_of(" \t\r") == p && line[p] == '{')
            fail("%s: a JSON object written over several lines, not JSON lines (one object per line)\n---> HINT: "
                 "convert it: jq -c . FILE > FILE.jsonl", where->c_str());
        first = false;
        int64_t idx;
        int split;
        if (begin_record(split_src, &idx, &split)) emit(idx, split, true, n, where, std::move(line));
    }
}

void Reader::read_tar(ByteSource& src, const Where& where, int split_src, int depth, bool maybe_not_a_tar) {
    CHECK_USER(depth < 4, "%s: archives nested more than 4 deep", where->c_str());
    TarReader tar(src, *where, maybe_not_a_tar);
    std::string path;
    bool regular;
    while (tar.next(&path, &regular)) {
        if (!regular) continue;
        FileType t = classify(path);
        if (t.kind == KIND_UNKNOWN) {
            ctr.entries_skipped++;
            tar.skip();
            continue;
        }
        auto w = std::make_shared<const std::string>(*where + ":" + path);
        if (t.kind == KIND_TEXT && o.doc_sep == "file") {
            int64_t idx;
            int split;
            if (!begin_record(split_src, &idx, &split)) {
                tar.skip();  // already in the shards: not even decompressed
                continue;
            }
        }
        EntrySource es(tar, *w);
        auto dec = make_decoder(t.codec, es, *w);
        if (t.kind == KIND_TAR && !names_a_tar(path)) {  // (a tar by its compression alone: it may be a changelog.gz)
            try {
                read_tar(dec ? *dec : es, w, split_src, depth + 1, /*maybe_not_a_tar=*/true);
            } catch (const TarReader::NotATar&) {
                ctr.entries_skipped++;
                tar.skip();
            }
            continue;
        }
        read_kind(t.kind, dec ? *dec : es, w, split_src, depth + 1);
    }
}

}  // namespace prep
