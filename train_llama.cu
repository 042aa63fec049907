// train_llama: pretrain LLaMA (C4 token shards in GaLore's protocol, or the built-in corpus).
// flags -> config -> data -> model -> loop: the loop is train/trainer.h, the model's forward and backward
// are model/llama.h, the ops kernels/.
#include "model/llama.h"
#include "train/trainer.h"

int main(int argc, char** argv) { return train_main_checked<Llama>(Arch::LLAMA, "train_llama", argc, argv); }
