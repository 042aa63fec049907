// Training checkpoints on disk: a directory DIR/step_NNNNNNNN per saved step (model.safetensors, config.json,
// state.safetensors and a COMPLETE marker written last), committed atomically (written into a temp directory,
// fsynced, renamed), rotated, and found again on resume: a crash leaves either no step directory or a complete one.
// Also TrainState, the host-side contents of state.safetensors. What a run puts into a checkpoint is
// train/run_checkpoint.h's. One run (with several ranks, rank 0 alone) owns a checkpoint directory. The layout, the
// temp and dot directories, what "complete" means and why temp dirs carry the host name: docs/DESIGN.md section 7.4.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct SafeTensorsFile;

// Version of the checkpoint layout and of the state file's conventions. Bump it when either changes in a way
// an older reader would misread; readers refuse versions newer than theirs.
inline constexpr int CHECKPOINT_FORMAT_VERSION = 1;

// File names inside a checkpoint directory.
inline constexpr const char* CKPT_MODEL_FILE = "model.safetensors";
inline constexpr const char* CKPT_CONFIG_FILE = "config.json";
inline constexpr const char* CKPT_STATE_FILE = "state.safetensors";
inline constexpr const char* CKPT_COMPLETE_FILE = "COMPLETE";
// In a checkpoint DIRECTORY (beside its step_NNNNNNNN): the step of a --overwrite run's first checkpoint while the
// run removes the earlier run's (checkpoint_rotate), which --resume finishes when a kill stopped it (or refuses the
// directory when that checkpoint is not usable); and the lock a run holds on it (train/trainer.h).
inline constexpr const char* CKPT_REPLACING_FILE = ".replacing_earlier_run";
inline constexpr const char* CKPT_LOCK_FILE = ".lock";

// "step_00000100", and DIR + "/step_00000100".
std::string checkpoint_dir_name(int64_t step);
// A name a checkpoint directory's own folders have: step_NNNNNNNN, or a writer's .tmp_/.old_/.del_step_... folder.
bool is_checkpoint_folder_name(const std::string& name);
std::string checkpoint_path(const std::string& dir, int64_t step);

// Creates DIR (and parents) when missing, runs checkpoint_cleanup(DIR), then creates and returns the temp
// directory DIR/.tmp_step_NNNNNNNN_HOST_PID for the caller to write the checkpoint's files into.
std::string checkpoint_begin(const std::string& dir, int64_t step);
// Fsyncs every file in tmpdir, writes COMPLETE (fsynced), fsyncs tmpdir, renames it to final_dir and fsyncs
// the parent. final_dir must be in the same directory as tmpdir (rename is atomic only there). An existing
// final_dir is replaced safely: renamed aside first, removed only once the new one is in place. With
// replaces_earlier_run (the first checkpoint of an --overwrite run: checkpoint_rotate), CKPT_REPLACING_FILE is written
// before the rename, naming the step and the checksum of this checkpoint's COMPLETE marker, so that a kill between
// the rename and the rotation leaves the directory marked (a --resume continued the earlier run's newest).
void checkpoint_commit(const std::string& tmpdir, const std::string& final_dir, bool replaces_earlier_run = false);
// Removes a temp directory after a failed write (no error if it is already gone).
void checkpoint_abort(const std::string& tmpdir);
// After the checkpoint of step `written` was committed: with replaces_earlier_run (the first checkpoint of a run
// started with --overwrite in a directory that holds an earlier run's) deletes every other complete checkpoint,
// naming each (a --resume would continue that run instead of this one), CKPT_REPLACING_FILE marking the directory
// meanwhile (written before the commit published `written`, with its marker's checksum: checkpoint_commit); then the oldest complete ones up to step `written` so that the newest keep_last of those remain
// (keep_last <= 0: delete none; newer ones, which a resume skipped as damaged, stay and do not count). Incomplete step
// directories and other processes' temp dirs are never touched. Runs checkpoint_cleanup first.
void checkpoint_rotate(const std::string& dir, int keep_last, int64_t written, bool replaces_earlier_run = false);
// Steps of the complete checkpoints in DIR, ascending; empty when DIR is missing or holds none.
std::vector<int64_t> checkpoint_steps(const std::string& dir);
// The newest complete checkpoint directory in DIR (DIR/step_NNNNNNNN), or "" if none. Read-only.
std::string checkpoint_latest(const std::string& dir);
// True when path is a step directory whose COMPLETE marker lists files that all exist with their sizes;
// otherwise false, with the reason in *why when given.
bool checkpoint_is_complete(const std::string& path, std::string* why = nullptr);
// Complete, and every file matches the checksum its COMPLETE marker records (the whole files are read; a marker
// without checksums, as builds before them wrote, is damaged). Otherwise false, with the reason in *why.
bool checkpoint_verify(const std::string& path, std::string* why = nullptr);
// Removes leftovers of dead processes of this host in DIR: temp dirs (.tmp_step_*), half-deleted dirs
// (.del_step_*) and moved-aside dirs (.old_step_*); a moved-aside dir whose step directory is missing (the
// replacing process died between its two renames) is renamed back instead (or, when that fails, left); one whose
// replacement was published goes as a commit's would (a folder of other files, a file or a link is kept beside as
// step_N.kept; all of it when the new checkpoint's marker cannot be read). Returns how many it handled.
int checkpoint_cleanup(const std::string& dir);
// For --resume PATH: PATH is either one checkpoint (a step directory, which must verify) or a checkpoint directory,
// whose newest step directory that verifies is returned (after checkpoint_cleanup, so an interrupted replacement is
// undone); newer ones that do not are reported on stdout with the reason. Fails with "no checkpoint in PATH" when
// there is none, and with each step directory's problem when none verifies. A directory that a stopped --overwrite
// run marked (CKPT_REPLACING_FILE): the removal of the earlier run's checkpoints is finished (they are deleted) when
// the marked one is intact and is the one the mark names by its COMPLETE marker's checksum, else refused (before the
// commit published it, the checkpoints there are the earlier run's); a step directory there other than the marked
// one is refused.
std::string checkpoint_resolve(const std::string& path);
// Where a run with --ckpt-dir PATH writes its checkpoints: PATH, or, when PATH is one checkpoint (a directory with a
// COMPLETE marker, however spelled: DIR/step_N, DIR/step_N/., "." inside it) continued with --resume, the directory
// above it (absolute), provided that holds no newer intact checkpoint (else the new checkpoints would mix with those
// of the run that went on; or it is the marked one of a stopped --overwrite, whose newer ones checkpoint_resolve
// removes). One checkpoint without --resume is refused: the new run's checkpoints would nest in it.
std::string checkpoint_run_dir(const std::string& path, bool resume);

// Owns a checkpoint being written: begin in the constructor, commit() to publish, and the destructor removes
// the temp dir when commit was never reached (an exception while writing leaves nothing behind).
struct CheckpointWriter {
    std::string dir;        // the run's checkpoint directory
    int64_t step;
    std::string tmpdir;     // where the files go
    bool committed = false;

    CheckpointWriter(const std::string& dir, int64_t step);
    ~CheckpointWriter();
    CheckpointWriter(const CheckpointWriter&) = delete;
    CheckpointWriter& operator=(const CheckpointWriter&) = delete;

    // Path of a file inside the checkpoint being written: tmpdir + "/" + name.
    std::string file(const std::string& name) const { return tmpdir + "/" + name; }
    // Publishes the checkpoint as checkpoint_path(dir, step) and returns that path (replaces_earlier_run:
    // checkpoint_commit's).
    std::string commit(bool replaces_earlier_run = false);
};

// ----------------------------------------------------------------------------
// TrainState: the host-side contents of state.safetensors.
//
// Named tensors (F32, I64 or U8, any shape) plus string metadata. What goes in is the caller's choice; the
// usual names are "adamw.m", "adamw.v", "adamw.master" (F32 over the whole parameter buffer; with 8-bit states
// "adamw.m8", "adamw.v8" (U8), their block scales, and adamw.m, adamw.v for the small tensors only), the PRAC state
// ("prac.<site>.*"), "data.train.rank<r>" (I64 loader state per rank). Metadata holds seeds, RNG states, the
// number of ranks, the ZeRO stage and the run's flags for check_compatible.
//
// In the file, __metadata__ holds the caller's keys as they are, plus reserved keys starting with "ckpt."
// (format, format_version, step, adam_t, and a 64-bit checksum per tensor so bit rot in the data is caught).
// Reading is lazy: read_state validates the header, and get_* read each tensor from the file when asked,
// checking its checksum, so resuming a large model does not hold a second copy of the optimizer state.
struct StateTensor {
    std::string dtype;             // "F32", "I64" or "U8"
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;    // the data (little-endian); empty while it still lives only in the file
    bool in_file = false;          // true for tensors of a state read from a file, until loaded
    uint64_t checksum = 0;         // from the file (in_file) — verified when the data is read
    size_t numel() const;
    size_t nbytes() const;
};

struct TrainState {
    int64_t step = 0;     // completed optimizer steps: the resumed run's next step
    int64_t adam_t = 0;   // AdamW's t (its bias correction), usually == step
    std::map<std::string, std::string> meta;
    std::map<std::string, StateTensor> tensors;
    std::string path;     // the file it was read from ("" when built in memory): for messages
    std::shared_ptr<const SafeTensorsFile> file;  // open while tensors are read lazily

    // Adding copies data (numel of shape elements); a name that is already there is an error. alloc_* give
    // zeroed storage to fill in place (e.g. download the optimizer state straight into it, with no copy).
    void add_f32(const std::string& name, const float* data, const std::vector<int64_t>& shape);
    void add_i64(const std::string& name, const int64_t* data, const std::vector<int64_t>& shape);
    void add_u8(const std::string& name, const uint8_t* data, const std::vector<int64_t>& shape);
    float* alloc_f32(const std::string& name, const std::vector<int64_t>& shape);
    int64_t* alloc_i64(const std::string& name, const std::vector<int64_t>& shape);

    bool has(const std::string& name) const { return tensors.count(name) != 0; }
    // Fails naming the tensor when it is missing, along with the file.
    const StateTensor& tensor(const std::string& name) const;
    std::vector<int64_t> shape(const std::string& name) const { return tensor(name).shape; }
    // Copy a tensor out. Fail when it is missing, has another dtype, has numel != n (the caller states what it
    // expects), or its data does not match its checksum (a corrupt file).
    void get_f32(const std::string& name, float* dst, size_t n) const;
    void get_i64(const std::string& name, int64_t* dst, size_t n) const;
    void get_u8(const std::string& name, uint8_t* dst, size_t n) const;

    // Metadata. Keys starting with "ckpt." are reserved. Integers are stored in decimal, doubles with 17
    // significant digits (exact round trip, infinities included; a NaN comes back without its payload).
    // get_* fail naming the key when it is missing or not a number.
    void set(const std::string& key, const std::string& value);
    void set_i64(const std::string& key, int64_t value);
    void set_u64(const std::string& key, uint64_t value);
    void set_f64(const std::string& key, double value);
    bool has_meta(const std::string& key) const { return meta.count(key) != 0; }
    const std::string& get(const std::string& key) const;
    int64_t get_i64(const std::string& key) const;
    uint64_t get_u64(const std::string& key) const;
    double get_f64(const std::string& key) const;
};

// Writes the state to path atomically (safetensors_write: temp file, fsync, rename).
void write_state(const std::string& path, const TrainState& state);
// Opens and validates state.safetensors: safetensors header, format name and version, reserved keys, a
// checksum for every tensor, only F32/I64/U8 tensors. Fails with "corrupt checkpoint state PATH: ..." and a hint.
TrainState read_state(const std::string& path);

// Fails unless the state's metadata `key` equals `expected`, naming the key, the saved and the current value:
// for the settings a resumed run must share with the run that wrote the checkpoint (model, batch size, ranks...).
void check_compatible(const TrainState& state, const std::string& key, const std::string& expected);
void check_compatible(const TrainState& state, const std::string& key, int64_t expected);

// The 64-bit checksum stored per tensor (fast, not cryptographic: it detects corruption, not tampering).
uint64_t state_checksum(const void* data, size_t nbytes);
// state_checksum of a whole file's bytes (UserError when it cannot be read).
uint64_t file_checksum(const std::string& path);
