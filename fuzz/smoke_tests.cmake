# Included by the root CMakeLists.txt in the main (GCC) build when tests are on: builds the
# libFuzzer targets of fuzz/ with clang in ${CMAKE_BINARY_DIR}/fuzz (an ExternalProject, so it
# builds alongside the main build) and registers one ctest test per target that fuzzes it for a
# few seconds from its seed corpus (scripts/fuzz.sh); a crash, sanitizer report, leak or
# timeout fails the test. -DLLMSERVE_FUZZ_SMOKE=OFF leaves all of it out. See docs/fuzzing.md.
option(LLMSERVE_FUZZ_SMOKE "Build fuzz/ with clang and run each fuzz target briefly in ctest" ON)
set(LLMSERVE_FUZZ_SMOKE_SECONDS 5 CACHE STRING "Seconds each fuzz target runs in ctest")
# A fixed seed: the suite replays the same mutations on every machine, so what it finds in CI
# it finds on a developer's machine first (and a red CI is never a new random draw). Long
# runs (scripts/fuzz.sh) draw fresh seeds.
set(LLMSERVE_FUZZ_SMOKE_SEED 1 CACHE STRING "libFuzzer -seed of the ctest fuzz runs")
if(LLMSERVE_FUZZ_SMOKE)
  find_program(LLMSERVE_FUZZ_CLANGXX NAMES clang++ clang++-14)
  if(NOT LLMSERVE_FUZZ_CLANGXX)
    message(FATAL_ERROR "clang++ not found for the fuzz targets: run scripts/install-deps.sh "
                        "(clang, libclang-rt-14-dev) or configure with -DLLMSERVE_FUZZ_SMOKE=OFF")
  endif()
  include(ExternalProject)
  include(ProcessorCount)
  ProcessorCount(LLMSERVE_FUZZ_JOBS)
  if(LLMSERVE_FUZZ_JOBS EQUAL 0)
    set(LLMSERVE_FUZZ_JOBS 2)
  endif()
  set(LLMSERVE_FUZZ_BUILD_DIR ${CMAKE_BINARY_DIR}/fuzz)
  ExternalProject_Add(llmserve_fuzz
    SOURCE_DIR ${CMAKE_SOURCE_DIR}
    BINARY_DIR ${LLMSERVE_FUZZ_BUILD_DIR}
    CMAKE_GENERATOR Ninja
    CMAKE_ARGS -DLLMSERVE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
               -DCMAKE_CXX_COMPILER=${LLMSERVE_FUZZ_CLANGXX}
    BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> -j ${LLMSERVE_FUZZ_JOBS}
    BUILD_ALWAYS ON
    INSTALL_COMMAND ""
    USES_TERMINAL_BUILD ON)
  foreach(target gguf safetensors request tokenizer jinja)
    add_test(NAME fuzz_${target}
             COMMAND ${CMAKE_SOURCE_DIR}/scripts/fuzz.sh --no-build --build-dir
                     ${LLMSERVE_FUZZ_BUILD_DIR} ${target} ${LLMSERVE_FUZZ_SMOKE_SECONDS}
                     -- -seed=${LLMSERVE_FUZZ_SMOKE_SEED})
    set_tests_properties(fuzz_${target} PROPERTIES TIMEOUT 180 LABELS fuzz)
  endforeach()
endif()
