// llamacpp_logits.cpp - reference tool: dump llama.cpp's logits for a token sequence.
//
// Loads a GGUF model with llama.cpp (CPU only, n_gpu_layers = 0), decodes the
// given token ids in ONE batch (seq 0, positions 0..T-1) with logits requested
// for every position, and writes them as a float32 NumPy .npy file of shape
// [T, n_vocab]. The context uses flash attention DISABLED and an F32 KV cache so
// the result is as close as llama.cpp gets to an exact F32 reference.
//
// It uses only llama.cpp's public C API (llama.h). It is built by hand against
// a llama.cpp peer checkout (e.g. /work/peers/llama.cpp built with CMake and
// -DBUILD_SHARED_LIBS=ON); it is NOT part of llmserve's build and not built by CI.
// scripts/references/llamacpp_reference.sh builds and runs it.
//
// Build (LLAMA = llama.cpp source dir, shared libs in $LLAMA/build/bin):
//   g++ -std=c++17 -O2 -I$LLAMA/include -I$LLAMA/ggml/include \
//       scripts/references/llamacpp_logits.cpp \
//       -L$LLAMA/build/bin -lllama -lggml -lggml-base \
//       -Wl,-rpath,$LLAMA/build/bin -o /tmp/llamacpp_logits
//
// Usage:
//   llamacpp_logits MODEL.gguf OUT.npy ID,ID,...

#include "llama.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static void quiet_log(enum ggml_log_level level, const char * text, void * /*user*/) {
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
        fputs(text, stderr);
    }
}

static bool parse_ids(const char * s, std::vector<llama_token> & out) {
    const char * p = s;
    while (*p) {
        char * end = nullptr;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno != 0 || v < 0 || v > INT32_MAX) {
            return false;
        }
        out.push_back((llama_token) v);
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') {
            p++;
        } else if (*p != '\0') {
            return false;
        }
    }
    return !out.empty();
}

// NumPy .npy format version 1.0, little-endian float32, C order.
static bool write_npy(const char * path, const std::vector<float> & data, size_t rows, size_t cols) {
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
    const size_t prefix = 6 + 2 + 2; // magic + version + header length (uint16)
    size_t total = prefix + dict.size() + 1; // +1 for trailing '\n'
    size_t pad = (64 - total % 64) % 64;
    dict.append(pad, ' ');
    dict.push_back('\n');
    if (dict.size() > 65535) {
        return false;
    }

    FILE * f = fopen(path, "wb");
    if (!f) {
        return false;
    }
    const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    const uint16_t hlen = (uint16_t) dict.size();
    const unsigned char hlen_le[2] = {(unsigned char) (hlen & 0xff), (unsigned char) (hlen >> 8)};
    bool ok = fwrite(magic, 1, 8, f) == 8 &&
              fwrite(hlen_le, 1, 2, f) == 2 &&
              fwrite(dict.data(), 1, dict.size(), f) == dict.size() &&
              fwrite(data.data(), sizeof(float), rows * cols, f) == rows * cols; // x86/arm: little-endian host
    ok = (fclose(f) == 0) && ok;
    return ok;
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL.gguf OUT.npy ID,ID,...\n", argv[0]);
        return 2;
    }
    const char * model_path = argv[1];
    const char * out_path   = argv[2];

    std::vector<llama_token> tokens;
    if (!parse_ids(argv[3], tokens)) {
        fprintf(stderr, "error: could not parse token id list '%s'\n", argv[3]);
        return 2;
    }
    const int32_t T = (int32_t) tokens.size();

    llama_log_set(quiet_log, nullptr);
    llama_backend_init();

    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers = 0; // CPU only

    llama_model * model = llama_model_load_from_file(model_path, mparams);
    if (!model) {
        fprintf(stderr, "error: failed to load model '%s'\n", model_path);
        return 1;
    }

    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    for (llama_token t : tokens) {
        if (t >= n_vocab) {
            fprintf(stderr, "error: token id %d out of range (n_vocab = %d)\n", t, n_vocab);
            llama_model_free(model);
            return 2;
        }
    }

    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx           = (uint32_t) T;
    cparams.n_batch         = (uint32_t) T;
    cparams.n_ubatch        = (uint32_t) T;
    cparams.n_seq_max       = 1;
    cparams.n_threads       = 2;
    cparams.n_threads_batch = 2;
    cparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cparams.type_k          = GGML_TYPE_F32;
    cparams.type_v          = GGML_TYPE_F32;
    cparams.offload_kqv     = false;
    cparams.op_offload      = false;
    cparams.embeddings      = false;
    cparams.no_perf         = true;

    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "error: failed to create context\n");
        llama_model_free(model);
        return 1;
    }
    if (llama_n_ctx(ctx) < (uint32_t) T || llama_n_ubatch(ctx) < (uint32_t) T) {
        fprintf(stderr, "warning: context n_ctx=%u n_ubatch=%u < T=%d\n",
                llama_n_ctx(ctx), llama_n_ubatch(ctx), T);
    }

    llama_batch batch = llama_batch_init(T, 0, 1);
    for (int32_t i = 0; i < T; i++) {
        batch.token[i]     = tokens[i];
        batch.pos[i]       = i;
        batch.n_seq_id[i]  = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i]    = 1; // logits for every position
    }
    batch.n_tokens = T;

    const int32_t rc = llama_decode(ctx, batch);
    if (rc != 0) {
        fprintf(stderr, "error: llama_decode returned %d\n", rc);
        llama_batch_free(batch);
        llama_free(ctx);
        llama_model_free(model);
        return 1;
    }

    std::vector<float> out((size_t) T * (size_t) n_vocab);
    for (int32_t i = 0; i < T; i++) {
        const float * row = llama_get_logits_ith(ctx, i);
        if (!row) {
            fprintf(stderr, "error: no logits for position %d\n", i);
            llama_batch_free(batch);
            llama_free(ctx);
            llama_model_free(model);
            return 1;
        }
        memcpy(out.data() + (size_t) i * n_vocab, row, sizeof(float) * (size_t) n_vocab);
    }

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();

    if (!write_npy(out_path, out, (size_t) T, (size_t) n_vocab)) {
        fprintf(stderr, "error: failed to write '%s'\n", out_path);
        return 1;
    }
    fprintf(stderr, "wrote %s: [%d, %d] float32\n", out_path, T, n_vocab);
    return 0;
}
