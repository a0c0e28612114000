# libFuzzer target for the printable address of a listening context
# (pml::parse_address, what connect() reads from the user or a lookup).
transit_fuzz_target(pml_address pml
  ${CMAKE_CURRENT_LIST_DIR}/fuzz_pml_address.cpp ${PROJECT_SOURCE_DIR}/pml/address.cpp
  ${PROJECT_SOURCE_DIR}/runtime/job_secret.cpp)
