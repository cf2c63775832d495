package io.pagewire.node.verbs;

import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionStatus;
import io.pagewire.node.nic.QpAddress;
import io.pagewire.node.nic.RegistrationMode;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import io.pagewire.proto.verbs.WorkRequest;

/**
 * The verbs wire's vocabulary ({@code verbs.proto}'s enums) in the NIC's terms and back, mapped once:
 * opcodes and completion statuses for both ways an application reaches the node (its session stream
 * and its shared-memory rings), registration modes, access rights and queue-pair addresses.
 */
final class WireCodes {
    /** The NIC's opcode for each wire number; null where the number names no work request. */
    private static final Completion.Opcode[] OPCODES;
    private static final int[] WIRE_OPCODES = new int[Completion.Opcode.values().length];
    private static final int[] WIRE_STATUSES = new int[CompletionStatus.values().length];

    static {
        int highest = 0;
        for (Completion.Opcode opcode : Completion.Opcode.values()) {
            WIRE_OPCODES[opcode.ordinal()] = WorkRequest.Opcode.valueOf(opcode.name()).getNumber();
            highest = Math.max(highest, WIRE_OPCODES[opcode.ordinal()]);
        }
        OPCODES = new Completion.Opcode[highest + 1];
        for (Completion.Opcode opcode : Completion.Opcode.values()) {
            if (opcode != Completion.Opcode.RECV && opcode != Completion.Opcode.RECV_RDMA_WITH_IMM) {
                OPCODES[WIRE_OPCODES[opcode.ordinal()]] = opcode; // a receive's opcode is never a work request's
            }
        }
        for (CompletionStatus status : CompletionStatus.values()) {
            WIRE_STATUSES[status.ordinal()] = io.pagewire.proto.verbs.CompletionStatus.valueOf(status.name()).getNumber();
        }
    }

    private WireCodes() {
    }

    /** The work request opcode a wire number names, or null for none (unset, unknown, a receive's). */
    static Completion.Opcode opcode(int wire) {
        return wire > 0 && wire < OPCODES.length ? OPCODES[wire] : null;
    }

    static int wireOpcode(Completion.Opcode opcode) {
        return WIRE_OPCODES[opcode.ordinal()];
    }

    static int wireStatus(CompletionStatus status) {
        return WIRE_STATUSES[status.ordinal()];
    }

    /** The NIC's registration mode for the wire's. */
    static RegistrationMode mode(io.pagewire.proto.verbs.RegistrationMode mode) {
        return switch (mode) {
            case PINNED -> RegistrationMode.PINNED;
            case PIN_ON_MISS -> RegistrationMode.PIN_ON_MISS;
            case SHADOW -> RegistrationMode.SHADOW;
            case ON_DEMAND -> RegistrationMode.ON_DEMAND;
            default -> throw new IllegalArgumentException("registration mode must be PINNED, PIN_ON_MISS, SHADOW or ON_DEMAND");
        };
    }

    /** The NIC's access rights for the wire's. */
    static Set<Access> access(List<io.pagewire.proto.verbs.Access> rights) {
        Set<Access> access = EnumSet.noneOf(Access.class);
        for (io.pagewire.proto.verbs.Access right : rights) {
            switch (right) {
                case LOCAL_WRITE -> access.add(Access.LOCAL_WRITE);
                case REMOTE_WRITE -> access.add(Access.REMOTE_WRITE);
                case REMOTE_READ -> access.add(Access.REMOTE_READ);
                case REMOTE_ATOMIC -> access.add(Access.REMOTE_ATOMIC);
                case MW_BIND -> access.add(Access.MW_BIND);
                default -> throw new IllegalArgumentException("unknown access right " + right);
            }
        }
        return access;
    }

    /** A queue pair's address as the wire carries it. */
    static io.pagewire.proto.verbs.QpAddress address(QpAddress address) {
        return io.pagewire.proto.verbs.QpAddress.newBuilder().setNodeId(address.node()).setQpn(address.qpn())
                .setInitialCredits(address.initialCredits()).setPageSize(address.pageSize()).build();
    }
}
