package io.pagewire.kernel;

/** One virtual page of one address space, as a map key. */
record PageKey(AddressSpace space, long vpn) {
}
