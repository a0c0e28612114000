# libFuzzer target for what the runtime decodes of the launcher's and the other
# ranks' data: the local-peer list and the job secret's inputs.
transit_fuzz_target(runtime_blobs runtime
  ${CMAKE_CURRENT_LIST_DIR}/fuzz_runtime_blobs.cpp ${PROJECT_SOURCE_DIR}/runtime/job_secret.cpp)
