# libFuzzer target for what vader reads from other processes' memory (segment
# header check, FIFO, fast boxes).  Header-only.
transit_fuzz_target(vader_wire vader ${CMAKE_CURRENT_LIST_DIR}/fuzz_vader_wire.cpp)
