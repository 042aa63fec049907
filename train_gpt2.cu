// train_gpt2: pretrain GPT-2 (OpenWebText-style token shards, or the built-in corpus).
// flags -> config -> data -> model -> loop: the loop is train/trainer.h, the model's forward and backward
// (which ops run in which order, what is saved for backward) are model/gpt2.h, the ops kernels/.
#include "model/gpt2.h"
#include "train/trainer.h"

int main(int argc, char** argv) { return train_main_checked<GPT2>(Arch::GPT2, "train_gpt2", argc, argv); }
