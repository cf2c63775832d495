package io.pagewire.client;

/** The operations a queue pair performs. */
public enum Opcode {
    WRITE,
    WRITE_WITH_NOTIFY,
    READ,
    FETCH_ADD
}
