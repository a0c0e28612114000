# libFuzzer target for what a uct module reads from a peer: message headers,
# one-sided requests and replies, the address blob.  Header-only.
transit_fuzz_target(uct_messages uct ${CMAKE_CURRENT_LIST_DIR}/fuzz_uct_messages.cpp)
