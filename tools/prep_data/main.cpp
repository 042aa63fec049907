// prep_data: raw text -> token shards (data/shard.h) for ./train_gpt2 and ./train_llama. The options, the
// presets (c4, owt), the resume rules and where to download the corpora are in HELP (options.cpp) and in
// data/README.md; the pipeline and where each of its parts lives, in prep_data.h. This file: main, which
// reports errors and gives the exit status.
#include <cstdio>
#include <exception>

#include "common/error.h"
#include "common/files.h"  // file_size_limit_as_error
#include "tools/prep_data/prep_data.h"

int main(int argc, char** argv) {
    file_size_limit_as_error();
    try {
        prep::Options o = prep::parse_args(argc, argv);
        if (o.help || argc == 1) {
            std::fputs(prep::HELP, o.help ? stdout : stderr);
            return o.help ? 0 : 1;
        }
        prep::finish_options(o);
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
