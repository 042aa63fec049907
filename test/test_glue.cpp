// GLUE data and metrics (issue 17, deliverable 4): the metrics against scikit-learn / SciPy values
// (test/reference/make_glue_fixtures.py), and the readers on files in each task's GLUE TSV layout and in Hugging
// Face's JSONL field names, with the errors a wrong layout, label or row gives.
#include <gtest/gtest.h>
#include <sys/stat.h>  // mkfifo

#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "data/glue.h"
#include "test/test_files.h"
#include "train/glue_metrics.h"

namespace {

nlohmann::json fixture() {
    return nlohmann::json::parse(read_bytes(std::string(PRAC_SOURCE_DIR) + "/test/fixtures/glue/metrics.json"));
}

// The libraries compute in double like us, in another order: agreement to 1e-12 absolute (metrics are in [-1, 1]).
const double TOL = 1e-12;

TEST(GlueMetrics, ClassificationMatchesScikitLearn) {
    nlohmann::json doc = fixture();
    ASSERT_GE(doc["classification"].size(), 5u);
    for (const nlohmann::json& c : doc["classification"]) {
        std::vector<int> pred = c["pred"], label = c["label"];
        std::string name = c["name"];
        EXPECT_NEAR(glue_accuracy(pred, label), c["accuracy"].get<double>(), TOL) << name;
        EXPECT_NEAR(glue_matthews(pred, label, c["classes"]), c["matthews"].get<double>(), TOL) << name;
        if (c.contains("f1")) EXPECT_NEAR(glue_f1(pred, label), c["f1"].get<double>(), TOL) << name;
    }
}

TEST(GlueMetrics, CorrelationsMatchSciPy) {
    nlohmann::json doc = fixture();
    ASSERT_GE(doc["regression"].size(), 2u);
    for (const nlohmann::json& c : doc["regression"]) {
        std::vector<double> score = c["score"], target = c["target"];
        std::string name = c["name"];
        EXPECT_NEAR(glue_pearson(score, target), c["pearson"].get<double>(), TOL) << name;
        EXPECT_NEAR(glue_spearman(score, target), c["spearman"].get<double>(), TOL) << name;
    }
}

TEST(GlueMetrics, EachTaskReportsItsMetrics) {
    std::vector<int> pred = {1, 0, 1, 1}, label = {1, 0, 0, 1};
    auto names = [](const std::vector<std::pair<std::string, double>>& m) {
        std::string s;
        for (const auto& [k, v] : m) s += k + " ";
        return s;
    };
    EXPECT_EQ(names(glue_metrics(GlueTask::COLA, pred, label)), "matthews ");
    EXPECT_EQ(names(glue_metrics(GlueTask::MRPC, pred, label)), "f1 accuracy ");
    EXPECT_EQ(names(glue_metrics(GlueTask::QQP, pred, label)), "f1 accuracy ");
    EXPECT_EQ(names(glue_metrics(GlueTask::RTE, pred, label)), "accuracy ");
    EXPECT_EQ(names(glue_metrics(GlueTask::STSB, {}, {}, {1, 2, 3}, {1, 3, 2})), "pearson spearman ");
    // an unlabeled split (GLUE's test files) cannot be scored
    EXPECT_THROW(glue_metrics(GlueTask::SST2, {1, 0}, {1, -1}), UserError);
    EXPECT_THROW(glue_accuracy({1, 0}, {1}), UserError);
    // a constant sequence's correlations are undefined: NaN, as SciPy's pearsonr and spearmanr give (the run goes on
    // and says so; it used to stop after the first epoch)
    EXPECT_TRUE(std::isnan(glue_pearson({1, 1, 1}, {1, 2, 3})));
    EXPECT_TRUE(std::isnan(glue_spearman({1, 2, 3}, {2, 2, 2})));
}

struct GlueFiles : TmpDirTest {
    std::vector<GlueExample> read(GlueTask task, const std::string& name, const std::string& text) {
        write_bytes(file(name), text);
        return read_glue_file(task, file(name));
    }
    std::string error(GlueTask task, const std::string& name, const std::string& text) {
        try {
            read(task, name, text);
        } catch (const UserError& e) {
            return e.what();
        }
        return "(no error)";
    }
};

// One file per task in the GLUE distribution's TSV layout (header columns as download_glue_data.py's files have
// them), each row's text and label checked.
TEST_F(GlueFiles, TsvLayoutsOfTheEightTasks) {
    auto cola = read(GlueTask::COLA, "cola.tsv", "gj04\t1\t\tOur friends won't buy this analysis.\r\ngj04\t0\t*\tThey drank the pub.\n");
    ASSERT_EQ(cola.size(), 2u);
    EXPECT_EQ(cola[0].text_a, "Our friends won't buy this analysis.");  // CRLF stripped
    EXPECT_EQ(cola[0].label, 1);
    EXPECT_EQ(cola[1].label, 0);
    auto cola_test = read(GlueTask::COLA, "cola_test.tsv", "index\tsentence\n0\tBill whistled past the house.\n");
    EXPECT_EQ(cola_test[0].text_a, "Bill whistled past the house.");
    EXPECT_EQ(cola_test[0].label, -1);
    // a header (a pandas export's, or Hugging Face's columns) is said as one: it was a bad label 'label', or a count
    // of columns
    for (const char* header : {"sentence_source\tlabel\tlabel_notes\tsentence\n", "sentence\tlabel\tidx\n"}) {
        const std::string e = error(GlueTask::COLA, "cola_h.tsv", std::string(header) + "gj04\t1\t\tA sentence.\n");
        EXPECT_NE(e.find("cola_h.tsv:1: a header line"), std::string::npos) << e;
        EXPECT_NE(e.find("tail -n +2"), std::string::npos) << e;
    }

    auto sst = read(GlueTask::SST2, "sst.tsv", "sentence\tlabel\nhide new secretions \t0\n");
    EXPECT_EQ(sst[0].text_a, "hide new secretions ");
    EXPECT_EQ(sst[0].label, 0);

    auto mrpc = read(GlueTask::MRPC, "mrpc.tsv",
                     "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t702876\t702977\tAmrozi accused.\tReferring to him.\n");
    EXPECT_EQ(mrpc[0].text_a, "Amrozi accused.");
    EXPECT_EQ(mrpc[0].text_b, "Referring to him.");
    EXPECT_EQ(mrpc[0].label, 1);

    auto sts = read(GlueTask::STSB, "sts.tsv",
                    "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
                    "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\tAn air plane is taking off.\t5.000\n");
    EXPECT_EQ(sts[0].text_b, "An air plane is taking off.");
    EXPECT_FLOAT_EQ(sts[0].score, 5.0f);

    auto qqp = read(GlueTask::QQP, "qqp.tsv",
                    "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n133273\t213221\t213222\tHow is the life?\tHow is life?\t0\n");
    EXPECT_EQ(qqp[0].text_a, "How is the life?");
    EXPECT_EQ(qqp[0].label, 0);

    std::string mnli_header =
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
        "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n";
    auto mnli = read(GlueTask::MNLI, "mnli.tsv",
                     mnli_header + "0\t31193\t31193n\tgovernment\t(a)\t(b)\t(A)\t(B)\tConceptually cream.\tProduct and geography.\tneutral\tneutral\n" +
                         "1\t101457\t101457e\ttelephone\t(a)\t(b)\t(A)\t(B)\tyou know.\tYou lose.\tentailment\tcontradiction\n");
    EXPECT_EQ(mnli[0].text_a, "Conceptually cream.");
    EXPECT_EQ(mnli[0].label, 1);  // Hugging Face's order: entailment, neutral, contradiction
    EXPECT_EQ(mnli[1].label, 2);  // gold_label, not label1

    auto qnli = read(GlueTask::QNLI, "qnli.tsv", "index\tquestion\tsentence\tlabel\n0\tWhen?\tIn 1900.\tnot_entailment\n");
    EXPECT_EQ(qnli[0].text_a, "When?");
    EXPECT_EQ(qnli[0].label, 1);

    auto rte = read(GlueTask::RTE, "rte.tsv", "index\tsentence1\tsentence2\tlabel\n0\tNo weapons.\tWeapons found.\tentailment\n");
    EXPECT_EQ(rte[0].label, 0);
    auto rte_test = read(GlueTask::RTE, "rte_test.tsv", "index\tsentence1\tsentence2\n0\tA.\tB.\n");
    EXPECT_EQ(rte_test[0].label, -1);
}

// A line that is not UTF-8 is said with its file and line (the tokenizer found it later, as "document 1 of 2" and a
// byte offset within one text, with a hint naming a C++ function)
TEST_F(GlueFiles, InvalidUtf8IsSaidWithItsLine) {
    const std::string e = error(GlueTask::SST2, "bad.tsv", "sentence\tlabel\nok cow\t1\n\nbad \xff\xfe bytes\t0\n");
    EXPECT_NE(e.find("bad.tsv:4: invalid UTF-8 at byte 5 of the line (byte 0xff)"), std::string::npos) << e;
    EXPECT_NE(e.find("iconv -f LATIN1 -t UTF-8"), std::string::npos) << e;
    EXPECT_EQ(e.find("utf8_replace_invalid"), std::string::npos) << e;
}

// A UTF-8 byte order mark before the header (GLUE's MRPC files have one): skipped, not read as part of the first
// column's name (it hid MRPC's label column, "Quality"); a CoLA file (no header) keeps its first row. Each example
// knows its line, blank lines counted.
TEST_F(GlueFiles, ByteOrderMarkAndLineNumbers) {
    auto mrpc = read(GlueTask::MRPC, "mrpc.tsv",
                     "\xEF\xBB\xBFQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t7\t9\tA.\tB.\n\n0\t8\t6\tC.\tD.\n");
    ASSERT_EQ(mrpc.size(), 2u);
    EXPECT_EQ(mrpc[0].label, 1);
    EXPECT_EQ(mrpc[1].label, 0);
    EXPECT_EQ(mrpc[0].line, 2);
    EXPECT_EQ(mrpc[1].line, 4);
    auto cola = read(GlueTask::COLA, "cola.tsv", "\xEF\xBB\xBFgj04\t1\t\tOur friends won't buy this analysis.\n");
    ASSERT_EQ(cola.size(), 1u);
    EXPECT_EQ(cola[0].label, 1);
    EXPECT_EQ(cola[0].line, 1);
    auto sst = read(GlueTask::SST2, "sst.jsonl", "\xEF\xBB\xBF{\"sentence\": \"a\", \"label\": 1}\n\n{\"sentence\": \"b\", \"label\": 0}\n");
    ASSERT_EQ(sst.size(), 2u);
    EXPECT_EQ(sst[1].line, 3);
    // a BOM elsewhere is text: only the file's first bytes are skipped
    auto sst2 = read(GlueTask::SST2, "sst2.tsv", "sentence\tlabel\n\xEF\xBB\xBFgood\t1\n");
    EXPECT_EQ(sst2[0].text_a, "\xEF\xBB\xBFgood");
}

// GLUE's original QQP train.tsv splits a record whose question holds a newline over two short lines (line 97,931 of
// the file is `"<TAB>Was Muhammad a real historical figure? ...<TAB>0`, nyu-mll/GLUE-baselines#5): the file was refused
// whole. Its short lines are skipped, as transformers' GLUE processors skip them (IndexError), and said; the other
// rows load. A test file's short line is still an error (its rows are the submission's), as is one of too many columns.
TEST_F(GlueFiles, QqpsSplitRecordsAreSkippedAsTransformersSkipsThem) {
    const std::string header = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n";
    testing::internal::CaptureStdout();
    auto qqp = read(GlueTask::QQP, "qqp.tsv", header + "1\t2\t3\tHow?\tWhy?\t1\n"
                                              "4\t5\t6\tWhat is the first line of a question\n"
                                              "\"\tWas Muhammad a real historical figure?\t0\n"
                                              "7\t8\t9\tWho?\tWhere?\t0\n");
    const std::string said = testing::internal::GetCapturedStdout();
    ASSERT_EQ(qqp.size(), 2u);
    EXPECT_EQ(qqp[0].text_a, "How?");
    EXPECT_EQ(qqp[1].text_b, "Where?");
    EXPECT_EQ(qqp[1].line, 5);
    EXPECT_NE(said.find("qqp.tsv: skipped 2 lines of fewer than QQP's 6 columns (the first: line 3)"), std::string::npos)
        << said;
    EXPECT_NE(error(GlueTask::QQP, "qqp_test.tsv", "id\tquestion1\tquestion2\n0\tHow?\n").find("2 tab-separated columns"),
              std::string::npos);
    EXPECT_NE(error(GlueTask::QQP, "qqp7.tsv", header + "1\t2\t3\tHow?\tWhy?\t1\tx\n").find("7 tab-separated columns"),
              std::string::npos);
    EXPECT_NE(error(GlueTask::MRPC, "mrpc.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA.\n")
                  .find("4 tab-separated columns"), std::string::npos) << "other tasks: an error";
}

// The test splits (GLUE's test files: an index column, QQP's "id", no label; Hugging Face's: idx) keep each example's
// index, and --predict writes GLUE's submission rows: "index<TAB>prediction", the label's name for MNLI, QNLI and RTE,
// its id for the others, STS-B's score (9 significant digits: the float32 output exactly).
TEST_F(GlueFiles, TestSplitsKeepTheirIndexForGlueSubmissionFiles) {
    auto cola = read(GlueTask::COLA, "cola_test.tsv", "index\tsentence\n7\tBill whistled.\n8\tHe left.\n");
    EXPECT_EQ(cola[0].index, "7");
    EXPECT_EQ(cola[1].index, "8");
    auto qqp = read(GlueTask::QQP, "qqp_test.tsv", "id\tquestion1\tquestion2\n0\tHow?\tWhy?\n");
    EXPECT_EQ(qqp[0].index, "0");
    EXPECT_EQ(qqp[0].label, -1);
    auto mrpc = read(GlueTask::MRPC, "mrpc_test.tsv", "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n41\t1\t2\tA.\tB.\n");
    EXPECT_EQ(mrpc[0].index, "41");
    auto mrpc_train = read(GlueTask::MRPC, "mrpc.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA.\tB.\n");
    EXPECT_EQ(mrpc_train[0].index, "");  // no index column
    auto mnli = read(GlueTask::MNLI, "mnli_test.tsv",
                     "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
                     "sentence2_parse\tsentence1\tsentence2\n0\t1\t1n\tslate\t(a)\t(b)\t(A)\t(B)\tP.\tH.\n"
                     "1\t2\t2n\tslate\t(a)\t(b)\t(A)\t(B)\tQ.\tI.\n"
                     "2\t3\t3n\tslate\t(a)\t(b)\t(A)\t(B)\tR.\tJ.\n");
    ASSERT_EQ(mnli.size(), 3u);
    EXPECT_EQ(mnli[2].index, "2");
    EXPECT_EQ(mnli[2].label, -1);
    auto rte = read(GlueTask::RTE, "rte.jsonl", "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"label\": -1, \"idx\": 12}\n");
    EXPECT_EQ(rte[0].index, "12");

    const GlueTaskInfo& mi = glue_task_info(GlueTask::MNLI);
    EXPECT_EQ(mi.test_splits, (std::vector<std::string>{"test_matched", "test_mismatched"}));
    EXPECT_EQ(mi.submission_files, (std::vector<std::string>{"MNLI-m.tsv", "MNLI-mm.tsv"}));
    EXPECT_EQ(glue_submission_text(mi, mnli, {2, 0, 1}, {0, 0, 0}),
              "index\tprediction\n0\tcontradiction\n1\tentailment\n2\tneutral\n");
    EXPECT_EQ(glue_submission_text(glue_task_info(GlueTask::RTE), rte, {1}, {0}), "index\tprediction\n12\tnot_entailment\n");
    EXPECT_EQ(glue_submission_text(glue_task_info(GlueTask::COLA), cola, {1, 0}, {0, 0}), "index\tprediction\n7\t1\n8\t0\n");
    EXPECT_EQ(glue_task_info(GlueTask::COLA).submission_files, std::vector<std::string>{"CoLA.tsv"});
    // STS-B: the score; a file without indices: every row its position
    auto sts = read(GlueTask::STSB, "sts_test.jsonl", "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"label\": -1.0}\n"
                                                     "{\"sentence1\": \"c\", \"sentence2\": \"d\", \"label\": -1.0}\n");
    EXPECT_EQ(glue_submission_text(glue_task_info(GlueTask::STSB), sts, {0, 0}, {3.14159, -0.25}),
              "index\tprediction\n0\t3.14159\n1\t-0.25\n");
    EXPECT_EQ(glue_task_info(GlueTask::STSB).submission_files, std::vector<std::string>{"STS-B.tsv"});

    // an index that is missing from one row, not an integer, or given twice: said (a row without one renumbered
    // every row of the file from 0, and a string idx was dropped, with exit 0)
    EXPECT_NE(error(GlueTask::SST2, "gap.tsv", "index\tsentence\n100\ta\n\tb\n").find("gap.tsv:3: the index column is empty"),
              std::string::npos);
    EXPECT_NE(error(GlueTask::SST2, "s.jsonl", "{\"sentence\": \"a\", \"idx\": \"100\"}\n").find("s.jsonl:1: idx is \"100\", not an integer"),
              std::string::npos);
    EXPECT_NE(error(GlueTask::SST2, "m.jsonl", "{\"sentence\": \"a\", \"idx\": 4}\n{\"sentence\": \"b\"}\n").find("m.jsonl:2: no idx, line 1 has one"),
              std::string::npos);
    auto twice = read(GlueTask::SST2, "twice.tsv", "index\tsentence\n0\ta\n1\tb\n0\tc\n");
    try {
        check_unique_index(twice, "twice.tsv");
        ADD_FAILURE() << "an index given twice was accepted";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("twice.tsv:4: index 0 again (line 2 has it)"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(check_unique_index(cola, "cola_test.tsv"));
}

// The same tasks as Hugging Face `datasets` exports them (to_json: one object per line, label ids).
TEST_F(GlueFiles, JsonLinesWithHuggingFaceFields) {
    auto mnli = read(GlueTask::MNLI, "mnli.jsonl",
                     "{\"premise\": \"A man.\", \"hypothesis\": \"A person.\", \"label\": 0, \"idx\": 0}\n"
                     "{\"premise\": \"A dog.\", \"hypothesis\": \"A cat.\", \"label\": 2, \"idx\": 1}\n");
    ASSERT_EQ(mnli.size(), 2u);
    EXPECT_EQ(mnli[1].text_b, "A cat.");
    EXPECT_EQ(mnli[1].label, 2);
    auto sts = read(GlueTask::STSB, "sts.jsonl", "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"label\": 3.8, \"idx\": 0}\n");
    EXPECT_FLOAT_EQ(sts[0].score, 3.8f);
    auto sst_test = read(GlueTask::SST2, "sst.jsonl", "{\"sentence\": \"it is.\", \"label\": -1, \"idx\": 0}\n");
    EXPECT_EQ(sst_test[0].label, -1);
    // STS-B's test split likewise (-1.0, not a score outside [0, 5]): unlabeled, which training refuses with the hint
    // that GLUE's test files have no labels
    auto sts_test = read(GlueTask::STSB, "sts.jsonl", "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"label\": -1.0}\n");
    EXPECT_EQ(sts_test[0].label, -1);
    auto qqp = read(GlueTask::QQP, "qqp.jsonl", "{\"question1\": \"q?\", \"question2\": \"r?\", \"label\": 1}\n");
    EXPECT_EQ(qqp[0].label, 1);
}

TEST_F(GlueFiles, WrongLayoutsAreClearErrors) {
    // RTE's file given as MRPC: the header lacks MRPC's columns, and the message names them and the file
    std::string e = error(GlueTask::MRPC, "rte.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n");
    EXPECT_NE(e.find("'#1 String'"), std::string::npos) << e;
    EXPECT_NE(e.find("rte.tsv"), std::string::npos) << e;
    // a row with a missing column names its line
    e = error(GlueTask::RTE, "rte.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta b\tentailment\n");
    EXPECT_NE(e.find("rte.tsv:3"), std::string::npos) << e;
    // a label of another task
    e = error(GlueTask::RTE, "rte.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tneutral\n");
    EXPECT_NE(e.find("'neutral' is not a rte label"), std::string::npos) << e;
    e = error(GlueTask::SST2, "sst.tsv", "sentence\tlabel\ngood\t2\n");
    EXPECT_NE(e.find("'2' is not a sst2 label"), std::string::npos) << e;
    e = error(GlueTask::STSB, "sts.jsonl", "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"label\": 7}\n");
    EXPECT_NE(e.find("[0, 5]"), std::string::npos) << e;
    // 2^64 - 1 read as a signed integer is -1 (unlabeled): it is out of range
    e = error(GlueTask::SST2, "sst.jsonl", "{\"sentence\": \"a\", \"label\": 18446744073709551615}\n");
    EXPECT_NE(e.find("label 18446744073709551615 is not a sst2 label"), std::string::npos) << e;
    // JSONL with another task's fields, and a broken line
    e = error(GlueTask::QNLI, "qnli.jsonl", "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"label\": 0}\n");
    EXPECT_NE(e.find("\"question\""), std::string::npos) << e;
    e = error(GlueTask::SST2, "sst.jsonl", "{\"sentence\": \"a\", \"label\": 0}\n{\"sentence\": \n");
    EXPECT_NE(e.find("sst.jsonl:2"), std::string::npos) << e;
    e = error(GlueTask::SST2, "empty.tsv", "sentence\tlabel\n");
    EXPECT_NE(e.find("no examples"), std::string::npos) << e;
    // strtod reads "0x2" as 2; Python's float() (GLUE's readers) refuses it
    e = error(GlueTask::STSB, "hex.tsv", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
                                         "sentence2\tscore\n0\tg\tf\t2012\t0\ts\ts\ta\tb\t0x2\n");
    EXPECT_NE(e.find("hex.tsv:2: STS-B score '0x2' is not a number"), std::string::npos) << e;
    // Python's float() takes spaces on either side of the number ('3 ' was refused, ' 3' read), not spaces alone
    const std::string sts_header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\t"
                                   "score\n0\tg\tf\t2012\t0\ts\ts\ta\tb\t";
    for (const char* score : {" 3", "3 ", " 3.0  "}) {
        auto sts = read(GlueTask::STSB, "space.tsv", sts_header + score + "\n");
        ASSERT_EQ(sts.size(), 1u) << "'" << score << "'";
        EXPECT_EQ(sts[0].score, 3.0f) << "'" << score << "'";
    }
    e = error(GlueTask::STSB, "blank.tsv", sts_header + "  \n");
    EXPECT_NE(e.find("blank.tsv:2: STS-B score '  ' is not a number"), std::string::npos) << e;
    // a header with another layout's label column: its labels were read as missing, and a later "example 0 (line 2)
    // has no label" blamed a row that has one. Hugging Face's column names in a TSV, and RTE's file given as MNLI:
    e = error(GlueTask::QQP, "qqp.tsv", "question1\tquestion2\tlabel\tidx\nq a\tq b\t1\t0\n");
    EXPECT_NE(e.find("qqp.tsv: the header has no column 'is_duplicate', the GLUE qqp TSV's label, but has 'label'"),
              std::string::npos) << e;
    e = error(GlueTask::MNLI, "rte.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n");
    EXPECT_NE(e.find("no column 'gold_label'"), std::string::npos) << e;
    // a test file has no label column at all: read, unlabeled
    EXPECT_EQ(read(GlueTask::QQP, "test.tsv", "id\tquestion1\tquestion2\n0\tq a\tq b\n")[0].label, -1);
    // CR-only line endings: the whole file one line (it said "no examples")
    e = error(GlueTask::SST2, "mac.tsv", "sentence\tlabel\rgood\t1\rbad\t0\r");
    EXPECT_NE(e.find("mac.tsv:1: a carriage return inside the header"), std::string::npos) << e;
    // CR CR LF endings (the header's last name read "label\r", and the labels as missing): the line's end
    auto crcrlf = read(GlueTask::SST2, "crcrlf.tsv", "sentence\tlabel\r\r\ngood\t1\r\r\n");
    ASSERT_EQ(crcrlf.size(), 1u);
    EXPECT_EQ(crcrlf[0].label, 1);
    // a label column named with a trailing space or a capital: said as such (it was "example 0 has no label")
    e = error(GlueTask::SST2, "space.tsv", "sentence\tlabel \ngood\t1\n");
    EXPECT_NE(e.find("space.tsv: the header's column 'label ' is not 'label' (spaces or letter case differ)"),
              std::string::npos) << e;
    e = error(GlueTask::SST2, "caps.tsv", "sentence\tLabel\ngood\t1\n");
    EXPECT_NE(e.find("column 'Label' is not 'label'"), std::string::npos) << e;
    // a column the reader uses named twice: refused (the first copy was read, the other silently ignored)
    e = error(GlueTask::MRPC, "twice.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\tQuality\n1\t1\t2\ta\tb\t0\n");
    EXPECT_NE(e.find("twice.tsv: the header names column 'Quality' twice (columns 1 and 6)"), std::string::npos) << e;
    e = error(GlueTask::SST2, "twice.tsv", "sentence\tlabel\tsentence\ngood\t1\tbad\n");
    EXPECT_NE(e.find("column 'sentence' twice (columns 1 and 3)"), std::string::npos) << e;
    // UTF-16 (Excel's "Unicode text"), with and without its byte order mark: said, with the conversion (it read a
    // header "\xff\xfes" cut at a NUL, or "invalid UTF-8")
    std::string utf16;
    for (char c : std::string("sentence\tlabel\ngood\t1\nbad\t0\n")) utf16 += std::string(1, c) + '\0';
    e = error(GlueTask::SST2, "bom16.tsv", "\xff\xfe" + utf16);
    EXPECT_NE(e.find("bom16.tsv: this looks like UTF-16 text (its byte order mark)"), std::string::npos) << e;
    EXPECT_NE(e.find("iconv -f UTF-16 -t UTF-8"), std::string::npos) << e;
    e = error(GlueTask::COLA, "nobom16.tsv", utf16);
    EXPECT_NE(e.find("nobom16.tsv: this looks like UTF-16 text (NUL bytes between its characters)"), std::string::npos)
        << e;
}

TEST_F(GlueFiles, TaskNamesAndSplitFiles) {
    EXPECT_EQ(glue_task_from_name("SST-2"), GlueTask::SST2);
    EXPECT_EQ(glue_task_from_name("sts-b"), GlueTask::STSB);
    EXPECT_EQ(glue_task_from_name("mnli"), GlueTask::MNLI);
    try {
        glue_task_from_name("squad");
        ADD_FAILURE() << "squad accepted";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("cola, sst2"), std::string::npos) << e.what();
    }
    EXPECT_EQ(glue_task_info(GlueTask::MNLI).dev_splits, (std::vector<std::string>{"dev_matched", "dev_mismatched"}));
    EXPECT_EQ(glue_task_info(GlueTask::STSB).num_labels, 1);
    EXPECT_THROW(glue_split_path(dir, "train"), UserError);
    write_bytes(file("train.jsonl"), "{}\n");
    EXPECT_EQ(glue_split_path(dir, "train"), file("train.jsonl"));
    write_bytes(file("train.tsv"), "x\n");
    EXPECT_THROW(glue_split_path(dir, "train"), UserError);  // both: ambiguous
    // a split that is a directory, and a --data-dir that is missing, were "no train split in DIR (looked for ...)"
    std::filesystem::create_directory(file("dev.tsv"));
    auto message = [](const std::function<void()>& f) {
        try {
            f();
        } catch (const UserError& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    std::string e = message([&] { glue_split_path(dir, "dev"); });
    EXPECT_NE(e.find(file("dev.tsv") + " is a directory: the dev split is a .tsv or .jsonl file"), std::string::npos)
        << e;
    // a named pipe: said as such (its open waited for a writer forever when the split was read)
    ASSERT_EQ(mkfifo(file("test.jsonl").c_str(), 0600), 0);
    e = message([&] { glue_split_path(dir, "test"); });
    EXPECT_NE(e.find(file("test.jsonl") + " is a named pipe (FIFO), not a file"), std::string::npos) << e;
    e = message([&] { glue_split_path(dir + "/nowhere", "dev"); });
    EXPECT_NE(e.find("--data-dir " + dir + "/nowhere: no such directory"), std::string::npos) << e;
    // Hugging Face's name of a dev split (a datasets export) is said, with the rename (it was "no dev_matched split")
    write_bytes(file("validation_matched.jsonl"), "{}\n");
    e = message([&] { glue_split_path(dir, "dev_matched"); });
    EXPECT_NE(e.find("but there is validation_matched.jsonl: Hugging Face's name of this split"), std::string::npos)
        << e;
    EXPECT_NE(e.find("mv " + dir + "/validation_matched.jsonl " + dir + "/dev_matched.jsonl"), std::string::npos) << e;
}

}  // namespace
