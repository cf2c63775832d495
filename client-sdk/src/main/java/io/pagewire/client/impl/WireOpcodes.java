package io.pagewire.client.impl;

import io.pagewire.client.Opcode;
import io.pagewire.proto.verbs.WorkRequest;

/** The SDK's opcodes and their numbers on the wire (verbs.proto), mapped once instead of by name per request. */
final class WireOpcodes {
    private static final int[] TO_WIRE = new int[Opcode.values().length];
    private static final Opcode[] FROM_WIRE;

    static {
        int highest = 0;
        for (Opcode opcode : Opcode.values()) {
            TO_WIRE[opcode.ordinal()] = WorkRequest.Opcode.valueOf(opcode.name()).getNumber();
            highest = Math.max(highest, TO_WIRE[opcode.ordinal()]);
        }
        FROM_WIRE = new Opcode[highest + 1];
        for (Opcode opcode : Opcode.values()) {
            FROM_WIRE[TO_WIRE[opcode.ordinal()]] = opcode;
        }
    }

    private WireOpcodes() {
    }

    static int toWire(Opcode opcode) {
        return TO_WIRE[opcode.ordinal()];
    }

    /** The SDK's opcode for a wire number, or null for one it does not know. */
    static Opcode fromWire(int number) {
        return number >= 0 && number < FROM_WIRE.length ? FROM_WIRE[number] : null;
    }
}
