// prep_data: raw text -> token shards (data/shard.h) for ./train_gpt2 and ./train_llama. The options, the
// presets (c4, owt), the resume rules and where to download the corpora are in HELP (options.cpp) and in
// data/README.md; the pipeline and where each of its parts lives, in prep_data.h. This file: main, which
// reports errors and gives the exit status.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>

#include "common/error.h"
#include "common/files.h"  // file_size_limit_as_error, closed_stdout_as_error
#include "tools/prep_data/prep_data.h"

// A stop signal ends the run as before (its default action: exit status 128 + the signal) after one line that says
// how to go on: whatever shards were finished are kept, and --resume continues from them. write() and raise() are
// async-signal-safe.
static void on_stop_signal(int sig) {
    static const char resumable[] = "\nprep_data: stopped by a signal; the same command with --resume (without "
                                    "--overwrite) continues after the last shard it finished\n";
    static const char from_start[] = "\nprep_data: stopped by a signal before its first shard was finished; run the "
                                     "same command again to start over\n";
    // (between the first shard's rename and the state file: the same command was refused, its shard there)
    static const char over[] = "\nprep_data: stopped by a signal before its state file listed its first shard; run "
                               "the same command with --overwrite to start over\n";
    ssize_t ignored = prep::g_resumable == 1   ? write(2, resumable, sizeof resumable - 1)
                      : prep::g_resumable == 2 ? write(2, over, sizeof over - 1)
                                               : write(2, from_start, sizeof from_start - 1);
    (void)ignored;
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

int main(int argc, char** argv) {
    file_size_limit_as_error();
    for (int sig : {SIGINT, SIGTERM, SIGHUP})  // (one the launcher ignores stays ignored: nohup's SIGHUP)
        if (std::signal(sig, on_stop_signal) == SIG_IGN) std::signal(sig, SIG_IGN);
    try {
        prep::Options o = prep::parse_args(argc, argv);
        if (o.help || argc == 1) {
            std::fputs(prep::HELP, o.help ? stdout : stderr);
            if (o.help) check_stdout_written("the help");
            return o.help ? 0 : 1;
        }
        prep::finish_options(o);
        closed_stdout_as_error();  // (after --help, which ends quietly in a closed pipe, as filters do)
        return prep::run(o);
    } catch (const UserError& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "\nprep_data: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "\nprep_data: internal error: %s\n", e.what());
        return 2;
    }
}
