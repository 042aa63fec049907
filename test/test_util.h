// Helpers the CPU test binaries share.
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <exception>
#include <string>

#include "common/error.h"

// Runs `stmt`; expects a UserError whose message contains every one of the strings that follow. Any other exception
// fails too: the binaries would report it as an internal error, not a clear message.
#define EXPECT_USER_ERROR(stmt, ...)                                                                  \
    do {                                                                                              \
        bool caught_ = false;                                                                         \
        try {                                                                                         \
            stmt;                                                                                     \
        } catch (const UserError& e_) {                                                               \
            caught_ = true;                                                                           \
            const std::string msg_ = e_.what();                                                       \
            for (const char* part_ : {__VA_ARGS__})                                                   \
                EXPECT_NE(msg_.find(part_), std::string::npos) << "the message lacks \"" << part_     \
                                                               << "\":\n" << msg_;                    \
        } catch (const std::exception& e_) {                                                          \
            caught_ = true;                                                                           \
            ADD_FAILURE() << #stmt << " threw a non-UserError exception (the binary would report an " \
                          << "internal error): " << e_.what();                                        \
        }                                                                                             \
        EXPECT_TRUE(caught_) << "expected a UserError from " #stmt;                                   \
    } while (0)

// Runs the enclosing scope with one OpenMP and one OpenBLAS thread: thousands of tiny GEMMs and QRs, where spinning
// thread pools on busy shared cores cost far more than they give. No result depends on the thread count.
struct SingleThreaded {
    int omp = omp_get_max_threads();
#ifdef OPENBLAS_VERSION
    int blas = openblas_get_num_threads();
#endif
    SingleThreaded() {
        omp_set_num_threads(1);
#ifdef OPENBLAS_VERSION
        openblas_set_num_threads(1);
#endif
    }
    ~SingleThreaded() {
        omp_set_num_threads(omp);
#ifdef OPENBLAS_VERSION
        openblas_set_num_threads(blas);
#endif
    }
};
