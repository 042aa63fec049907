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
    std::vector<std::string> test_splits;  // MNLI: test_matched and test_mismatched; others: test
    // GLUE's submission file of each test split (CoLA.tsv, MNLI-m.tsv, ...): rows "index<TAB>prediction"; the
    // prediction is the label's name for the NLI tasks (MNLI, QNLI, RTE), else its id (STS-B: the score)
    std::vector<std::string> submission_files;
    bool submit_label_names;
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
    std::string index;   // its id in the file: the TSV's index column (QQP's: id), the JSON lines' idx (in every
                         // example of the file or in none); "" if none
};

// Reads one split file: *.jsonl as JSON lines (fields sentence / sentence1, sentence2 / question, sentence /
// question1, question2 / premise, hypothesis, and label; idx), anything else as the GLUE TSV of the task (columns
// found by header name; CoLA's TSV has no header: source, label, original label, sentence). The test splits of
// the GLUE TSVs carry no label column: their examples have label -1.
std::vector<GlueExample> read_glue_file(GlueTask task, const std::string& path);

// --predict: GLUE's submission file of one test split: a header "index<TAB>prediction", then per example its index
// (the file's index column or idx field; every example's position in the file when any example has none) and the
// prediction: STS-B's score (%.9g: the model's float32 output exactly), the NLI tasks' label names, the other tasks'
// label ids. pred: the argmax per example; score: STS-B's output.
std::string glue_submission_text(const GlueTaskInfo& task, const std::vector<GlueExample>& examples,
                                 const std::vector<int>& pred, const std::vector<double>& score);

// A test split's indices name its rows in a submission file: one given twice is an error naming both lines.
void check_unique_index(const std::vector<GlueExample>& examples, const std::string& path);

// DIR/<split>.tsv or DIR/<split>.jsonl, whichever exists (an error naming both when neither does, or when both
// do); split is "train", "dev", "dev_matched", ... (glue_task_info().dev_splits).
std::string glue_split_path(const std::string& dir, const std::string& split);
