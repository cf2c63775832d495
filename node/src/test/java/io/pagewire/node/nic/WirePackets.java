package io.pagewire.node.nic;

import com.google.protobuf.ByteString;
import io.pagewire.proto.fabric.Syndrome;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * The NIC's packets beside fabric.proto's generated ones, for tests that compare what the lane codec
 * writes and reads with what protobuf itself does: a field-by-field conversion both ways, and random
 * packets that set every field.
 */
public final class WirePackets {
    private WirePackets() {
    }

    public static io.pagewire.proto.fabric.Packet toProto(Packet p) {
        return io.pagewire.proto.fabric.Packet.newBuilder()
                .setDstQpn(p.getDstQpn()).setSrcQpn(p.getSrcQpn()).setPsn(p.getPsn()).setOpcodeValue(p.getOpcodeValue())
                .setRemoteAddress(p.getRemoteAddress()).setRkey(p.getRkey()).setLength(p.getLength())
                .setPayload(ByteString.copyFrom(p.payloadArray(), p.payloadOffset(), p.payloadLength()))
                .setCounterId(p.getCounterId()).setAdd(p.getAdd()).setSyndromeValue(p.getSyndromeValue()).setAckPsn(p.getAckPsn())
                .setCreditLimit(p.getCreditLimit()).setRnrDelayNs(p.getRnrDelayNs()).setAtomicResult(p.getAtomicResult())
                .setError(p.getError()).setImmediate(p.getImmediate()).setSwap(p.getSwap()).setRetransmitted(p.getRetransmitted())
                .setSolicited(p.getSolicited()).setInvalidateRkey(p.getInvalidateRkey()).setQkey(p.getQkey())
                .setGlobalRoute(p.getGlobalRoute()).setMulticastLid(p.getMulticastLid()).setReceivesPark(p.getReceivesPark())
                .setCreditsSpent(p.getCreditsSpent())
                .build();
    }

    public static List<io.pagewire.proto.fabric.Packet> toProto(PacketBatch batch) {
        List<io.pagewire.proto.fabric.Packet> all = new ArrayList<>();
        for (Packet p : batch) {
            all.add(toProto(p));
        }
        return all;
    }

    /** {@code proto}'s fields into {@code into}, which gets a payload of its own. */
    public static Packet fromProto(io.pagewire.proto.fabric.Packet proto, Packet into) {
        return into.setDstQpn(proto.getDstQpn()).setSrcQpn(proto.getSrcQpn()).setPsn(proto.getPsn()).setOpcodeValue(proto.getOpcodeValue())
                .setRemoteAddress(proto.getRemoteAddress()).setRkey(proto.getRkey()).setLength(proto.getLength())
                .setPayload(proto.getPayload().toByteArray())
                .setCounterId(proto.getCounterId()).setAdd(proto.getAdd()).setSyndromeValue(proto.getSyndromeValue())
                .setAckPsn(proto.getAckPsn()).setCreditLimit(proto.getCreditLimit()).setRnrDelayNs(proto.getRnrDelayNs())
                .setAtomicResult(proto.getAtomicResult()).setError(proto.getError()).setImmediate(proto.getImmediate())
                .setSwap(proto.getSwap()).setRetransmitted(proto.getRetransmitted()).setSolicited(proto.getSolicited())
                .setInvalidateRkey(proto.getInvalidateRkey()).setQkey(proto.getQkey()).setGlobalRoute(proto.getGlobalRoute())
                .setMulticastLid(proto.getMulticastLid()).setReceivesPark(proto.getReceivesPark()).setCreditsSpent(proto.getCreditsSpent());
    }

    /** {@code count} packets whose every field is random (or, one time in three, left at zero). */
    public static List<io.pagewire.proto.fabric.Packet> randomProto(Random random, int count) {
        List<io.pagewire.proto.fabric.Packet> all = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            byte[] payload = new byte[random.nextInt(3) == 0 ? 0 : random.nextInt(5000)];
            random.nextBytes(payload);
            all.add(io.pagewire.proto.fabric.Packet.newBuilder()
                    .setDstQpn(maybe(random, random.nextInt())).setSrcQpn(maybe(random, random.nextInt()))
                    .setPsn(maybe(random, random.nextLong())).setOpcodeValue(maybe(random, random.nextInt(30)))
                    .setRemoteAddress(maybe(random, random.nextLong())).setRkey(maybe(random, random.nextLong()))
                    .setLength(maybe(random, random.nextInt())).setPayload(ByteString.copyFrom(payload))
                    .setCounterId(maybe(random, random.nextInt())).setAdd(maybe(random, random.nextLong()))
                    .setSyndromeValue(maybe(random, random.nextInt(Syndrome.values().length - 1)))
                    .setAckPsn(maybe(random, random.nextLong())).setCreditLimit(maybe(random, random.nextLong()))
                    .setRnrDelayNs(maybe(random, random.nextLong())).setAtomicResult(maybe(random, random.nextLong()))
                    .setError(random.nextInt(3) == 0 ? "refused: naïve ключ " + random.nextInt() : "")
                    .setImmediate(maybe(random, random.nextInt())).setSwap(maybe(random, random.nextLong()))
                    .setRetransmitted(random.nextBoolean()).setSolicited(random.nextBoolean())
                    .setInvalidateRkey(maybe(random, random.nextInt())).setQkey(maybe(random, random.nextInt()))
                    .setGlobalRoute(random.nextBoolean()).setMulticastLid(maybe(random, random.nextInt()))
                    .setReceivesPark(random.nextBoolean()).setCreditsSpent(maybe(random, random.nextInt()))
                    .build());
        }
        return all;
    }

    private static int maybe(Random random, int value) {
        return random.nextInt(3) == 0 ? 0 : value;
    }

    private static long maybe(Random random, long value) {
        return random.nextInt(3) == 0 ? 0 : value;
    }
}
