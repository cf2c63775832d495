package io.pagewire.node.verbs;

import com.google.protobuf.ByteString;
import io.grpc.stub.StreamObserver;
import io.pagewire.node.cm.CmChannel;
import io.pagewire.node.cm.CmEvents;
import io.pagewire.node.cm.CmException;
import io.pagewire.node.cm.ConnectionManager;
import io.pagewire.proto.verbs.CmAddress;
import io.pagewire.proto.verbs.CmCallRequest;
import io.pagewire.proto.verbs.CmCallResponse;
import io.pagewire.proto.verbs.CmChannelOpened;
import io.pagewire.proto.verbs.CmChannelRef;
import io.pagewire.proto.verbs.CmChannelRequest;
import io.pagewire.proto.verbs.CmConnParams;
import io.pagewire.proto.verbs.CmEvent;
import io.pagewire.proto.verbs.CmIdEvent;

/**
 * The connection manager's calls (librdmacm's API on the node): an event channel is a stream whose
 * end destroys the channel's ids; each operation on an id is a call that answers with the errno
 * librdmacm would return, the events it leads to following on the channel's stream.
 */
final class CmCalls {
    private final ConnectionManager manager;

    CmCalls(ConnectionManager manager) {
        this.manager = manager;
    }

    StreamObserver<CmChannelRequest> open(StreamObserver<CmEvent> events) {
        String caller = ControlCalls.caller();
        CmChannel channel;
        try {
            channel = manager.openChannel(caller, new CmChannel.Sink() {
                @Override
                public void event(CmEvents.Event event) {
                    try {
                        events.onNext(CmEvent.newBuilder().setEvent(toProto(event)).build());
                    } catch (RuntimeException e) {
                        // The stream is gone; its end closes the channel.
                    }
                }

                @Override
                public void close() {
                    try {
                        events.onCompleted();
                    } catch (RuntimeException e) {
                        // already ended
                    }
                }
            });
        } catch (CmException e) {
            events.onError(io.grpc.Status.UNAVAILABLE.withDescription(e.getMessage()).asRuntimeException());
            return new StreamObserver<>() {
                @Override
                public void onNext(CmChannelRequest value) {
                }

                @Override
                public void onError(Throwable t) {
                }

                @Override
                public void onCompleted() {
                }
            };
        }
        events.onNext(CmEvent.newBuilder().setOpened(CmChannelOpened.newBuilder()
                .setChannel(CmChannelRef.newBuilder().setChannelId(channel.id()).setChannelKey(channel.key()))
                .setAddress(CmAddress.newBuilder().setIp(ByteString.copyFrom(manager.address())))).build());
        long id = channel.id();
        return new StreamObserver<>() {
            @Override
            public void onNext(CmChannelRequest value) {
                // Nothing flows this way yet.
            }

            @Override
            public void onError(Throwable t) {
                manager.closeChannel(id);
            }

            @Override
            public void onCompleted() {
                manager.closeChannel(id);
                try {
                    events.onCompleted();
                } catch (RuntimeException e) {
                    // already ended
                }
            }
        };
    }

    void call(CmCallRequest request, StreamObserver<CmCallResponse> response) {
        CmCallResponse.Builder answer = CmCallResponse.newBuilder();
        try {
            answer.mergeFrom(run(request, ControlCalls.caller()));
        } catch (CmException e) {
            answer.setErrorNumber(e.code().errno()).setError(e.getMessage());
        }
        response.onNext(answer.build());
        response.onCompleted();
    }

    private CmCallResponse run(CmCallRequest r, String caller) {
        long channel = r.getChannel().getChannelId();
        long key = r.getChannel().getChannelKey();
        int id = r.getId();
        ConnectionManager.IdView view = switch (r.getOperationCase()) {
            case CREATE_ID -> manager.create(channel, key, caller, r.getCreateId().getPortSpace(), r.getCreateId().getQpType());
            case BIND -> manager.bind(channel, key, caller, id, r.getBind().getIp().toByteArray(), r.getBind().getPort());
            case RESOLVE_ADDRESS -> manager.resolveAddress(channel, key, caller, id, r.getResolveAddress().getSrc().getIp().toByteArray(),
                    r.getResolveAddress().getDst().getIp().toByteArray(), r.getResolveAddress().getDst().getPort(),
                    r.getResolveAddress().getTimeoutMs());
            case RESOLVE_ROUTE_TIMEOUT_MS -> manager.resolveRoute(channel, key, caller, id);
            case LISTEN -> manager.listen(channel, key, caller, id, r.getListen());
            case CONNECT -> manager.connect(channel, key, caller, id, params(r.getConnect()));
            case ACCEPT -> manager.accept(channel, key, caller, id, params(r.getAccept()));
            case REJECT -> manager.reject(channel, key, caller, id, r.getReject().toByteArray());
            case DISCONNECT -> manager.disconnect(channel, key, caller, id);
            case ESTABLISH -> manager.establish(channel, key, caller, id);
            case JOIN_MULTICAST -> manager.joinMulticast(channel, key, caller, id, r.getJoinMulticast().getIp().toByteArray(),
                    r.getJoinMulticast().getLid());
            case LEAVE_MULTICAST -> manager.leaveMulticast(channel, key, caller, id, r.getLeaveMulticast().getIp().toByteArray());
            case MIGRATE -> manager.migrate(channel, key, caller, id, r.getMigrate().getChannelId(), r.getMigrate().getChannelKey());
            case DESTROY -> {
                manager.destroy(channel, key, caller, id);
                yield null;
            }
            case OPERATION_NOT_SET -> throw new CmException(CmException.Code.INVALID, "a CmCall names no operation");
        };
        CmCallResponse.Builder b = CmCallResponse.newBuilder();
        if (view != null) {
            b.setId(view.id()).setSrc(address(view.src(), view.srcPort())).setDst(address(view.dst(), view.dstPort()));
        }
        return b.build();
    }

    private static CmEvents.Params params(CmConnParams p) {
        return new CmEvents.Params(p.getPrivateData().toByteArray(), p.getResponderResources(), p.getInitiatorDepth(), p.getRetryCount(),
                p.getRnrRetryCount(), p.getSrq(), p.getFlowControl(), p.getQpn(), p.getPsn(), p.getQkey());
    }

    private static CmAddress address(byte[] ip, int port) {
        return CmAddress.newBuilder().setIp(ByteString.copyFrom(ip)).setPort(port).build();
    }

    private static CmIdEvent toProto(CmEvents.Event e) {
        CmEvents.Params p = e.remote();
        return CmIdEvent.newBuilder().setType(e.type()).setId(e.id()).setListenId(e.listenId()).setStatus(e.status())
                .setParams(CmConnParams.newBuilder().setPrivateData(ByteString.copyFrom(p.privateData()))
                        .setResponderResources(p.responderResources()).setInitiatorDepth(p.initiatorDepth()).setRetryCount(p.retryCount())
                        .setRnrRetryCount(p.rnrRetryCount()).setSrq(p.srq()).setFlowControl(p.flowControl()).setQpn(p.qpn())
                        .setPsn(p.psn()).setQkey(p.qkey()))
                .setSrc(address(e.src(), e.srcPort())).setDst(address(e.dst(), e.dstPort()))
                .setPeerNode(e.peerNode() == null ? "" : e.peerNode()).setPeerLid(e.peerLid()).setPortSpace(e.portSpace())
                .setQpType(e.qpType()).build();
    }
}
