// GLUE (the PRAC paper's Table 5): the eight tasks, their examples read from the GLUE distribution's TSV files or
// from JSONL as the Hugging Face `datasets` glue configs export it, and the label conventions of both. A wrong
// column layout, an unknown label or a ragged row is an error naming the file, line and what was expected.
#pragma once
#include <string>
#include <vector>

enum class GlueTask { COLA, SST2, MRPC, STSB, QQP, MNLI, QNLI, RTE };

struct GlueTaskInfo {
    GlueTask task;
    const char* name;         // as on the command line and in Hugging Face: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte
    int num_labels;           // classes; 1 = regression (STS-B's similarity score 0..5)
    bool pair;                // sentence pairs (text_b used)
    std::vector<std::string> label_names;  // index = label id (Hugging Face's order); empty = ids in the files
    std::vector<std::string> dev_splits;   // MNLI: dev_matched and dev_mismatched; others: dev
};

const GlueTaskInfo& glue_task_info(GlueTask task);
// "cola", "sst2"/"sst-2", "mrpc", "stsb"/"sts-b", "qqp", "mnli", "qnli", "rte" (any case); anything else is an
// error listing the eight.
GlueTask glue_task_from_name(const std::string& name);

struct GlueExample {
    std::string text_a;
    std::string text_b;  // empty for single-sentence tasks
    int label = -1;      // class id; -1 = unlabeled (a test split)
    float score = 0.0f;  // STS-B's similarity (label is 0 there)
    int line = 0;        // its line in the file it was read from (1-based; 0: not read from a file)
};

// Reads one split file: *.jsonl as JSON lines (fields sentence / sentence1, sentence2 / question, sentence /
// question1, question2 / premise, hypothesis, and label), anything else as the GLUE TSV of the task (columns
// found by header name; CoLA's TSV has no header: source, label, original label, sentence). The test splits of
// the GLUE TSVs carry no label column: their examples have label -1.
std::vector<GlueExample> read_glue_file(GlueTask task, const std::string& path);

// DIR/<split>.tsv or DIR/<split>.jsonl, whichever exists (an error naming both when neither does, or when both
// do); split is "train", "dev", "dev_matched", ... (glue_task_info().dev_splits).
std::string glue_split_path(const std::string& dir, const std::string& split);
