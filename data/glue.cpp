// GLUE readers (glue.h). Column layouts of the GLUE distribution (download_glue_data.py) and the field names of
// Hugging Face's `datasets` glue configs, as facts: TASKS below holds each task's label order (the label names of
// `datasets`' glue configs) and submission files, the readers the column names.
#include "data/glue.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/error.h"
#include "common/files.h"  // refuse_special_file
#include "common/strings.h"        // join
#include "common/text_encoding.h"  // utf16_or_32
#include "data/byte_bpe.h"             // utf8_first_invalid

namespace {

// TSV column names of each task's header (CoLA has none), and its label column; "" = no second sentence.
struct TsvLayout {
    const char* text_a;
    const char* text_b;
    const char* label;
};

const GlueTaskInfo TASKS[] = {
    {GlueTask::COLA, "cola", 2, false, {"unacceptable", "acceptable"}, {"dev"}, {"test"}, {"CoLA.tsv"}, false},
    {GlueTask::SST2, "sst2", 2, false, {"negative", "positive"}, {"dev"}, {"test"}, {"SST-2.tsv"}, false},
    {GlueTask::MRPC, "mrpc", 2, true, {"not_equivalent", "equivalent"}, {"dev"}, {"test"}, {"MRPC.tsv"}, false},
    {GlueTask::STSB, "stsb", 1, true, {}, {"dev"}, {"test"}, {"STS-B.tsv"}, false},
    {GlueTask::QQP, "qqp", 2, true, {"not_duplicate", "duplicate"}, {"dev"}, {"test"}, {"QQP.tsv"}, false},
    {GlueTask::MNLI, "mnli", 3, true, {"entailment", "neutral", "contradiction"}, {"dev_matched", "dev_mismatched"},
     {"test_matched", "test_mismatched"}, {"MNLI-m.tsv", "MNLI-mm.tsv"}, true},
    {GlueTask::QNLI, "qnli", 2, true, {"entailment", "not_entailment"}, {"dev"}, {"test"}, {"QNLI.tsv"}, true},
    {GlueTask::RTE, "rte", 2, true, {"entailment", "not_entailment"}, {"dev"}, {"test"}, {"RTE.tsv"}, true},
};

TsvLayout tsv_layout(GlueTask t) {
    switch (t) {
        case GlueTask::SST2: return {"sentence", "", "label"};
        case GlueTask::MRPC: return {"#1 String", "#2 String", "Quality"};
        case GlueTask::STSB: return {"sentence1", "sentence2", "score"};
        case GlueTask::QQP: return {"question1", "question2", "is_duplicate"};
        case GlueTask::MNLI: return {"sentence1", "sentence2", "gold_label"};
        case GlueTask::QNLI: return {"question", "sentence", "label"};
        case GlueTask::RTE: return {"sentence1", "sentence2", "label"};
        case GlueTask::COLA: break;
    }
    return {"sentence", "", "label"};
}

// Hugging Face glue field names: (text_a, text_b) per task; the label field is "label" everywhere.
std::pair<const char*, const char*> jsonl_fields(GlueTask t) {
    switch (t) {
        case GlueTask::COLA:
        case GlueTask::SST2: return {"sentence", ""};
        case GlueTask::MRPC:
        case GlueTask::STSB:
        case GlueTask::RTE: return {"sentence1", "sentence2"};
        case GlueTask::QQP: return {"question1", "question2"};
        case GlueTask::MNLI: return {"premise", "hypothesis"};
        case GlueTask::QNLI: return {"question", "sentence"};
    }
    return {"", ""};
}

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        size_t tab = line.find('\t', start);
        out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
        if (tab == std::string::npos) return out;
        start = tab + 1;
    }
}

// A line without its CR LF ending (or CR CR LF: Python's universal newlines, GLUE's readers, read an empty line
// between them). A header with a CR left inside is refused by read_tsv: a file of CR-only (classic Mac) endings,
// read as one line.
std::string strip_cr(std::string s) {
    while (!s.empty() && s.back() == '\r') s.pop_back();
    return s;
}

bool ends_with(const std::string& s, const char* suffix) {
    size_t n = std::char_traits<char>::length(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool file_exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A class label given as its id ("0", "1") or its name ("entailment"); -1 for "" (unlabeled).
int parse_label(const GlueTaskInfo& info, const std::string& text, const std::string& where) {
    if (text.empty()) return -1;
    for (size_t i = 0; i < info.label_names.size(); i++)
        if (text == info.label_names[i]) return (int)i;
    if (text.size() == 1 && text[0] >= '0' && text[0] < '0' + info.num_labels) return text[0] - '0';
    const std::string names = join(info.label_names);
    fail("%s: label '%s' is not a %s label (0..%d%s%s)", where.c_str(), text.c_str(), info.name, info.num_labels - 1,
         names.empty() ? "" : " or ", names.c_str());
}

float check_score(double v, const std::string& text, const std::string& where) {
    if (!std::isfinite(v) || v < 0.0 || v > 5.0)
        fail("%s: STS-B score '%s' is not a number in [0, 5]", where.c_str(), text.c_str());
    return (float)v;
}

float parse_score(const std::string& text, const std::string& where) {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    // strtod also reads hexadecimal ("0x2"), which Python's float() (GLUE's readers) refuses; float() takes
    // whitespace on either side, strtod only before the number
    const bool hex = text.find_first_of("xX") != std::string::npos;
    const bool read_a_number = end != text.c_str();
    while (*end && std::isspace((unsigned char)*end)) end++;
    if (!read_a_number || *end != '\0' || hex)
        fail("%s: STS-B score '%s' is not a number", where.c_str(), text.c_str());
    return check_score(v, text, where);
}

std::vector<GlueExample> read_tsv(const GlueTaskInfo& info, const std::string& path, std::ifstream& in) {
    std::vector<GlueExample> out;
    std::string line;
    int ia = -1, ib = -1, il = -1, ii = -1;  // columns: text_a, text_b, label, index
    size_t columns = 0, lineno = 0;
    const TsvLayout layout = tsv_layout(info.task);
    if (info.task == GlueTask::COLA) {
        // train/dev: source, label, original label, sentence (no header); test: a header "index\tsentence"
        std::streampos start = in.tellg();
        if (std::getline(in, line) && strip_cr(line) == "index\tsentence") {
            ii = 0, ia = 1, columns = 2, lineno = 1;
        } else {
            // a header (a pandas or Hugging Face export's): its first line was read as an example, and said as a bad
            // label or a count of columns
            const std::vector<std::string> first = split_tabs(strip_cr(line));
            if (std::count(first.begin(), first.end(), "label") || std::count(first.begin(), first.end(), "sentence"))
                fail("%s:1: a header line ('%s'), which GLUE's CoLA train and dev TSVs do not have (their rows: "
                     "source, label, original label, sentence)\n---> HINT: drop the line if the columns are GLUE's "
                     "(tail -n +2 FILE > FILE.new), or write the rows as JSON lines (.jsonl: sentence, label)",
                     path.c_str(), strip_cr(line).c_str());
            in.clear();
            in.seekg(start);
            ia = 3, il = 1, columns = 4;
        }
    } else {
        if (!std::getline(in, line)) fail("%s: empty file (expected the GLUE %s TSV header)", path.c_str(), info.name);
        lineno = 1;
        if (strip_cr(line).find('\r') != std::string::npos)
            fail("%s:1: a carriage return inside the header (a file of CR-only line endings reads as one line)\n"
                 "---> HINT: convert its line endings: tr '\\r' '\\n' < FILE > FILE.new", path.c_str());
        std::vector<std::string> header = split_tabs(strip_cr(line));
        columns = header.size();
        auto find = [&](const char* name) {
            auto it = std::find(header.begin(), header.end(), std::string(name));
            return it == header.end() ? -1 : (int)(it - header.begin());
        };
        // a column read twice (a join's or a spreadsheet's export): which copy holds the text or label is not known
        const char* index_name = info.task == GlueTask::QQP ? "id" : "index";
        for (const char* name : {layout.text_a, layout.text_b, layout.label, index_name}) {
            if (!*name) continue;
            std::vector<size_t> at;
            for (size_t c = 0; c < header.size(); c++)
                if (header[c] == name) at.push_back(c + 1);
            if (at.size() > 1)
                fail("%s: the header names column '%s' twice (columns %zu and %zu): which one to read is not known "
                     "(header read: '%s')\n---> HINT: drop or rename the other column", path.c_str(), name, at[0],
                     at[1], strip_cr(line).c_str());
        }
        ia = find(layout.text_a);
        ib = *layout.text_b ? find(layout.text_b) : -1;
        il = find(layout.label);
        ii = find(index_name);
        if (ia < 0 || (*layout.text_b && ib < 0)) {
            std::string want = std::string("'") + layout.text_a + "'" + (*layout.text_b ? std::string(", '") + layout.text_b + "'" : "");
            fail("%s: the header has no column %s, which the GLUE %s TSV has (header read: '%s')\n"
                 "---> HINT: is this the %s file? JSON lines need the .jsonl extension",
                 path.c_str(), want.c_str(), info.name, strip_cr(line).c_str(), info.name);
        }
        // a label column named with a space around it or another letter case ("label ", "Label"): its labels were
        // read as missing ("example 0 has no label", of a row that has one)
        std::string label;  // (MRPC's is "Quality")
        for (const char* c = layout.label; *c; c++) label += (char)std::tolower((unsigned char)*c);
        for (const std::string& name : header) {
            std::string plain;
            for (char c : name)
                if (c != ' ' && c != '\t') plain += (char)std::tolower((unsigned char)c);
            if (il < 0 && plain == label)
                fail("%s: the header's column '%s' is not '%s' (spaces or letter case differ): its labels would "
                     "be read as missing\n---> HINT: rename the column to '%s'", path.c_str(), name.c_str(),
                     layout.label, layout.label);
        }
        // a test file has no label column; a header naming another task's (or Hugging Face's "label") is another
        // layout, whose labels were read as missing ("example 0 has no label", of a row that has one)
        for (GlueTask t : {GlueTask::SST2, GlueTask::MRPC, GlueTask::STSB, GlueTask::QQP, GlueTask::MNLI}) {
            const char* other = tsv_layout(t).label;
            if (il < 0 && find(other) >= 0)
                fail("%s: the header has no column '%s', the GLUE %s TSV's label, but has '%s' (header read: '%s')\n"
                     "---> HINT: is this the %s file? Hugging Face's glue rows (their label column is 'label') are read "
                     "from JSON lines (.jsonl)", path.c_str(), layout.label, info.name, other, strip_cr(line).c_str(),
                     info.name);
        }
    }
    // GLUE's original QQP train.tsv and dev.tsv hold records whose question has a newline in it, each split over two
    // lines of too few columns (nyu-mll/GLUE-baselines#5); transformers' GLUE processors skip such lines (their
    // IndexError), and QQP-clean has none: a labeled QQP file's short lines are skipped the same way, and counted.
    // Elsewhere (a test file's rows are its submission's) a line of other columns is an error.
    const bool skip_split_qqp_lines = info.task == GlueTask::QQP && il >= 0;
    size_t skipped = 0, first_skipped = 0;
    while (std::getline(in, line)) {
        lineno++;
        line = strip_cr(line);
        if (line.empty()) continue;
        std::vector<std::string> cols = split_tabs(line);
        std::string where = path + ":" + std::to_string(lineno);
        // (the tokenizer found it later, as "document i of n", its byte offset in one of the texts)
        if (const size_t bad = utf8_first_invalid(line); bad != std::string::npos)
            fail("%s: invalid UTF-8 at byte %zu of the line (byte 0x%02x)\n---> HINT: GLUE's files are UTF-8, as "
                 "Hugging Face's datasets read them; convert this one (a Latin-1 file: iconv -f LATIN1 -t UTF-8 FILE "
                 "> FILE.utf8)", where.c_str(), bad + 1, (unsigned)(unsigned char)line[bad]);
        if (cols.size() < columns && skip_split_qqp_lines) {
            if (!skipped++) first_skipped = lineno;
            continue;
        }
        if (cols.size() != columns)
            fail("%s: %zu tab-separated columns, the header (or GLUE's %s layout) has %zu", where.c_str(), cols.size(),
                 info.name, columns);
        GlueExample e;
        e.line = (int)lineno;
        e.text_a = cols[ia];
        if (ib >= 0) e.text_b = cols[ib];
        if (ii >= 0) {  // (a row without its index would renumber every row of a submission file)
            e.index = cols[ii];
            if (e.index.empty()) fail("%s: the index column is empty", where.c_str());
        }
        if (il >= 0) {
            if (info.num_labels == 1) {
                e.score = parse_score(cols[il], where);
                e.label = 0;
            } else {
                e.label = parse_label(info, cols[il], where);
            }
        }
        out.push_back(std::move(e));
    }
    if (skipped)
        std::printf("note: %s: skipped %zu line%s of fewer than QQP's %zu columns (the first: line %zu), as transformers' "
                    "GLUE processors do: GLUE's original QQP splits some questions over two lines (QQP-clean does not)\n",
                    path.c_str(), skipped, skipped == 1 ? "" : "s", columns, first_skipped);
    return out;
}

std::vector<GlueExample> read_jsonl(const GlueTaskInfo& info, const std::string& path, std::ifstream& in) {
    std::vector<GlueExample> out;
    auto [fa, fb] = jsonl_fields(info.task);
    std::string line;
    size_t lineno = 0;
    while (std::getline(in, line)) {
        lineno++;
        if (strip_cr(line).empty()) continue;
        std::string where = path + ":" + std::to_string(lineno);
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const std::exception& ex) {
            fail("%s: not a JSON object (%s)", where.c_str(), ex.what());
        }
        auto text = [&](const char* key) {
            if (!j.is_object() || !j.contains(key) || !j[key].is_string())
                fail("%s: no string field \"%s\", which Hugging Face's glue/%s rows have", where.c_str(), key, info.name);
            return j[key].get<std::string>();
        };
        GlueExample e;
        e.line = (int)lineno;
        e.text_a = text(fa);
        if (*fb) e.text_b = text(fb);
        if (j.contains("idx")) {
            if (!j["idx"].is_number_integer()) fail("%s: idx is %s, not an integer", where.c_str(), j["idx"].dump().c_str());
            e.index = j["idx"].dump();
        }
        if (!out.empty() && out.front().index.empty() != e.index.empty())  // (as for a TSV's index column)
            fail("%s: %s idx, line %d %s", where.c_str(), e.index.empty() ? "no" : "an", out.front().line,
                 e.index.empty() ? "has one" : "has none");
        if (j.contains("label")) {
            const nlohmann::json& l = j["label"];
            if (info.num_labels == 1) {
                if (!l.is_number()) fail("%s: STS-B label must be a number", where.c_str());
                // -1: unlabeled, as Hugging Face's test splits mark it for every task (a score of -1 is none)
                if (l.get<double>() != -1.0) {
                    e.score = check_score(l.get<double>(), l.dump(), where);
                    e.label = 0;
                }
            } else if (l.is_number_integer()) {
                if (l.is_number_unsigned() && l.get<uint64_t>() >= (uint64_t)info.num_labels)
                    fail("%s: label %s is not a %s label (0..%d, or -1 for unlabeled)", where.c_str(),
                         l.dump().c_str(), info.name, info.num_labels - 1);
                long v = l.get<long>();
                if (v < -1 || v >= info.num_labels)
                    fail("%s: label %ld is not a %s label (0..%d, or -1 for unlabeled)", where.c_str(), v, info.name,
                         info.num_labels - 1);
                e.label = (int)v;
            } else if (l.is_string()) {
                e.label = parse_label(info, l.get<std::string>(), where);
            } else {
                fail("%s: label must be an integer or a label name", where.c_str());
            }
        }
        out.push_back(std::move(e));
    }
    return out;
}

}  // namespace

const GlueTaskInfo& glue_task_info(GlueTask task) { return TASKS[(int)task]; }

GlueTask glue_task_from_name(const std::string& name) {
    std::string n;
    for (char c : name)
        if (c != '-') n += (char)std::tolower((unsigned char)c);
    for (const GlueTaskInfo& t : TASKS)
        if (n == t.name) return t.task;
    fail("unknown GLUE task '%s'\n---> HINT: one of cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte", name.c_str());
}

std::vector<GlueExample> read_glue_file(GlueTask task, const std::string& path) {
    refuse_special_file(path, "GLUE file");
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open GLUE file %s", path.c_str());
    // UTF-16 (Excel's "Unicode text", PowerShell's default) or UTF-32: read as UTF-8 it was a header "\xff\xfes" cut
    // at the first NUL, or "invalid UTF-8"
    std::string head(4096, '\0');
    in.read(head.data(), (std::streamsize)head.size());
    head.resize((size_t)in.gcount());
    const TextEncoding e = utf16_or_32(head);
    if (*e.name)
        fail("%s: this looks like %s text (%s), not UTF-8\n---> HINT: convert it: iconv -f %s -t UTF-8 FILE > "
             "FILE.utf8 (then give it the .tsv or .jsonl name)", path.c_str(), e.name, e.why, e.name);
    in.clear();
    in.seekg(0);
    // a UTF-8 byte order mark (GLUE's MRPC files have one, as do files saved by some editors): not part of the
    // header's first name, which it would hide
    char bom[3] = {};
    if (!(in.read(bom, 3) && bom[0] == '\xEF' && bom[1] == '\xBB' && bom[2] == '\xBF')) {
        in.clear();
        in.seekg(0);
    }
    const GlueTaskInfo& info = glue_task_info(task);
    std::vector<GlueExample> out = ends_with(path, ".jsonl") ? read_jsonl(info, path, in) : read_tsv(info, path, in);
    if (out.empty()) fail("%s: no examples", path.c_str());
    return out;
}

std::string glue_split_path(const std::string& dir, const std::string& split) {
    std::string tsv = dir + "/" + split + ".tsv", jsonl = dir + "/" + split + ".jsonl";
    bool has_tsv = file_exists(tsv), has_jsonl = file_exists(jsonl);
    if (has_tsv && has_jsonl) fail("both %s and %s exist: keep one", tsv.c_str(), jsonl.c_str());
    if (!has_tsv && !has_jsonl) {
        struct stat st;
        CHECK_USER(stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "--data-dir %s: %s", dir.c_str(),
                   stat(dir.c_str(), &st) != 0 ? "no such directory" : "not a directory");
        for (const std::string& p : {tsv, jsonl}) {
            refuse_special_file(p, "GLUE file");  // a named pipe, a device: said as such
            CHECK_USER(stat(p.c_str(), &st) != 0, "%s is a directory: the %s split is a .tsv or .jsonl file", p.c_str(),
                       split.c_str());
        }
        // Hugging Face's datasets name the dev splits validation, validation_matched, validation_mismatched
        std::string hf = split.rfind("dev", 0) == 0 ? "validation" + split.substr(3) : "";
        for (const char* ext : {".jsonl", ".tsv"})
            if (!hf.empty() && file_exists(dir + "/" + hf + ext))
                fail("no %s split in %s (looked for %s and %s), but there is %s%s: Hugging Face's name of this split\n"
                     "---> HINT: rename it: mv %s/%s%s %s/%s%s", split.c_str(), dir.c_str(), tsv.c_str(), jsonl.c_str(),
                     hf.c_str(), ext, dir.c_str(), hf.c_str(), ext, dir.c_str(), split.c_str(), ext);
        fail("no %s split in %s (looked for %s and %s)", split.c_str(), dir.c_str(), tsv.c_str(), jsonl.c_str());
    }
    return has_tsv ? tsv : jsonl;
}

std::string glue_submission_text(const GlueTaskInfo& task, const std::vector<GlueExample>& examples,
                                 const std::vector<int>& pred, const std::vector<double>& score) {
    if (pred.size() != examples.size() || score.size() != examples.size())
        throw std::logic_error("glue_submission_text: sizes differ");
    const bool file_index = std::all_of(examples.begin(), examples.end(), [](const GlueExample& e) {
        return !e.index.empty();
    });
    std::string out = "index\tprediction\n";
    for (size_t i = 0; i < examples.size(); i++) {
        out += file_index ? examples[i].index : std::to_string(i);
        if (task.num_labels == 1) {
            out += format("\t%.9g\n", score[i]);
        } else {
            if (pred[i] < 0 || pred[i] >= task.num_labels)
                throw std::logic_error(format("glue_submission_text: prediction %d of example %zu", pred[i], i));
            out += "\t" + (task.submit_label_names ? task.label_names[pred[i]] : std::to_string(pred[i])) + "\n";
        }
    }
    return out;
}

void check_unique_index(const std::vector<GlueExample>& examples, const std::string& path) {
    std::map<std::string, int> line_of;
    for (const GlueExample& e : examples) {
        if (e.index.empty()) continue;
        auto [it, fresh] = line_of.emplace(e.index, e.line);
        if (!fresh)
            fail("%s:%d: index %s again (line %d has it): a submission file names each row once", path.c_str(), e.line,
                 e.index.c_str(), it->second);
    }
}
