package io.pagewire.node.verbs;

import com.google.protobuf.UnsafeByteOperations;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.pagewire.kernel.AddressSpace;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.proto.verbs.AtomicWordRequest;
import io.pagewire.proto.verbs.AtomicWordResponse;
import io.pagewire.node.nic.MemoryWindow;
import io.pagewire.proto.verbs.AdviseRequest;
import io.pagewire.proto.verbs.AllocateWindowRequest;
import io.pagewire.proto.verbs.AllocateWindowResponse;
import io.pagewire.proto.verbs.DeallocateWindowRequest;
import io.pagewire.proto.verbs.DeallocateWindowResponse;
import io.pagewire.proto.verbs.AdviseResponse;
import io.pagewire.proto.verbs.AllocateRequest;
import io.pagewire.proto.verbs.AllocateResponse;
import io.pagewire.proto.verbs.DeregisterRegionRequest;
import io.pagewire.proto.verbs.DeregisterRegionResponse;
import io.pagewire.proto.verbs.FreeRequest;
import io.pagewire.proto.verbs.FreeResponse;
import io.pagewire.proto.verbs.LoadRequest;
import io.pagewire.proto.verbs.MapCpuPagesRequest;
import io.pagewire.proto.verbs.MapCpuPagesResponse;
import io.pagewire.proto.verbs.LoadResponse;
import io.pagewire.proto.verbs.PageOutRequest;
import io.pagewire.proto.verbs.PageOutResponse;
import io.pagewire.proto.verbs.RegisterRegionRequest;
import io.pagewire.proto.verbs.RegisterRegionResponse;
import io.pagewire.proto.verbs.StoreRequest;
import io.pagewire.proto.verbs.StoreResponse;
import java.util.Set;

/**
 * The calls on a session's memory: allocate, free, page out, store and load its virtual memory, and
 * register, deregister and advise its regions (what {@code ibv_reg_mr} and {@code ibv_advise_mr} do).
 */
final class MemoryCalls {
    /** Largest single Load, so that a response fits the message limit. */
    private static final int MAX_LOAD = 16 << 20;

    private final VerbsContext context;
    private final Sessions sessions;
    private final ControlCalls control;

    MemoryCalls(VerbsContext context, Sessions sessions, ControlCalls control) {
        this.context = context;
        this.sessions = sessions;
        this.control = control;
    }

    void allocate(AllocateRequest request, StreamObserver<AllocateResponse> response) {
        control.paced(response, () -> {
            Session session = sessions.get(request.getEndpoint());
            long limit = context.virtualBytesPerSession();
            synchronized (session.allocation) {
                long allocated = session.endpoint.space().allocatedBytes();
                if (request.getLength() > limit - allocated) {
                    throw Status.RESOURCE_EXHAUSTED.withDescription("endpoint " + session.endpoint.id() + " has " + allocated
                            + " bytes of virtual memory; " + request.getLength() + " more would pass its limit of " + limit
                            + " (pagewire.quota.virtualBytesPerSession)").asRuntimeException();
                }
                long address = request.getAddress();
                if (address == 0) {
                    address = session.endpoint.space().allocate(request.getLength());
                } else {
                    session.endpoint.space().allocateAt(address, request.getLength());
                }
                return AllocateResponse.newBuilder().setAddress(address).build();
            }
        });
    }

    void free(FreeRequest request, StreamObserver<FreeResponse> response) {
        control.paced(response, () -> {
            AddressSpace space = sessions.get(request.getEndpoint()).endpoint.space();
            if (request.getLength() == 0) {
                space.free(request.getAddress());
            } else {
                space.freeRange(request.getAddress(), request.getLength());
            }
            return FreeResponse.getDefaultInstance();
        });
    }

    /** Not paced: this is a program's page faults and its answers to reclaim, as frequent as its memory needs. */
    void mapCpuPages(MapCpuPagesRequest request, StreamObserver<MapCpuPagesResponse> response) {
        ControlCalls.answer(response, () -> {
            Session session = sessions.get(request.getEndpoint());
            AddressSpace space = session.endpoint.space();
            if (request.getRelease() || request.getDiscard()) {
                space.releaseForCpu(request.getAddress(), request.getLength());
                if (request.getDiscard()) {
                    space.discard(request.getAddress(), request.getLength());
                }
                return MapCpuPagesResponse.getDefaultInstance();
            }
            session.mapsCpuPages();
            MapCpuPagesResponse.Builder answer = MapCpuPagesResponse.newBuilder();
            for (int frame : space.holdForCpu(request.getAddress(), request.getLength())) {
                answer.addFrames(frame);
            }
            return answer.build();
        });
    }

    void pageOut(PageOutRequest request, StreamObserver<PageOutResponse> response) {
        control.paced(response, () -> PageOutResponse.newBuilder()
                .setPages(sessions.get(request.getEndpoint()).endpoint.space().pageOut(request.getAddress(), request.getLength())).build());
    }

    void store(StoreRequest request, StreamObserver<StoreResponse> response) {
        ControlCalls.answer(response, () -> {
            sessions.get(request.getEndpoint()).endpoint.space().store(request.getAddress(), request.getData().asReadOnlyByteBuffer());
            return StoreResponse.getDefaultInstance();
        });
    }

    void load(LoadRequest request, StreamObserver<LoadResponse> response) {
        ControlCalls.answer(response, () -> {
            long length = Integer.toUnsignedLong(request.getLength());
            if (length > MAX_LOAD) {
                throw new IllegalArgumentException("a load takes at most " + MAX_LOAD + " bytes, asked for " + length);
            }
            byte[] data = new byte[request.getLength()];
            sessions.get(request.getEndpoint()).endpoint.space().load(request.getAddress(), data, 0, data.length);
            return LoadResponse.newBuilder().setData(UnsafeByteOperations.unsafeWrap(data)).build();
        });
    }

    void atomicWord(AtomicWordRequest request, StreamObserver<AtomicWordResponse> response) {
        ControlCalls.answer(response, () -> {
            AddressSpace space = sessions.get(request.getEndpoint()).endpoint.space();
            long before = request.getOp() == AtomicWordRequest.Op.COMPARE_SWAP
                    ? space.compareAndSwapLong(request.getAddress(), request.getOperand(), request.getSwap())
                    : space.fetchAddLong(request.getAddress(), request.getOperand());
            return AtomicWordResponse.newBuilder().setBefore(before).build();
        });
    }

    // ---- registration ---------------------------------------------------------------------------------

    void registerRegion(RegisterRegionRequest request, StreamObserver<RegisterRegionResponse> response) {
        control.paced(response, () -> {
            Endpoint endpoint = sessions.get(request.getEndpoint()).endpoint;
            if (request.getCheckOnly()) {
                if (!request.getImplicit() && WireCodes.mode(request.getMode()) == RegistrationMode.PINNED) {
                    endpoint.space().checkPinRange(request.getAddress(), request.getLength());
                }
                return RegisterRegionResponse.getDefaultInstance();
            }
            Set<Access> access = WireCodes.access(request.getAccessList());
            MemoryRegion region;
            if (request.getImplicit()) {
                region = endpoint.registerImplicit(access);
            } else {
                region = endpoint.register(request.getAddress(), request.getLength(), WireCodes.mode(request.getMode()), access);
            }
            region.protectionDomain(request.getProtectionDomain());
            return RegisterRegionResponse.newBuilder().setLkey(region.lkey()).setRkey(region.rkey())
                    .setAddress(region.address()).setLength(region.length()).build();
        });
    }

    void deregisterRegion(DeregisterRegionRequest request, StreamObserver<DeregisterRegionResponse> response) {
        control.paced(response, () -> {
            Endpoint endpoint = sessions.get(request.getEndpoint()).endpoint;
            endpoint.deregister(sessions.get(request.getEndpoint()).region(request.getLkey()));
            return DeregisterRegionResponse.getDefaultInstance();
        });
    }

    void allocateWindow(AllocateWindowRequest request, StreamObserver<AllocateWindowResponse> response) {
        control.paced(response, () -> {
            MemoryWindow.Type type = switch (request.getType()) {
                case 1 -> MemoryWindow.Type.ONE;
                case 2 -> MemoryWindow.Type.TWO;
                default -> throw new IllegalArgumentException("a memory window is of type 1 or 2, not " + Integer.toUnsignedString(request.getType()));
            };
            MemoryWindow window = sessions.get(request.getEndpoint()).endpoint.allocateWindow(type);
            return AllocateWindowResponse.newBuilder().setRkey((int) window.rkey()).build();
        });
    }

    void deallocateWindow(DeallocateWindowRequest request, StreamObserver<DeallocateWindowResponse> response) {
        control.paced(response, () -> {
            sessions.get(request.getEndpoint()).endpoint.deallocateWindow(Integer.toUnsignedLong(request.getRkey()));
            return DeallocateWindowResponse.getDefaultInstance();
        });
    }

    void advise(AdviseRequest request, StreamObserver<AdviseResponse> response) {
        control.pacedStart(response, () -> adviseNow(request, response));
    }

    private void adviseNow(AdviseRequest request, StreamObserver<AdviseResponse> response) {
        try {
            Endpoint endpoint = sessions.get(request.getEndpoint()).endpoint;
            Endpoint.Advice advice = switch (request.getAdvice()) {
                case PREFETCH -> Endpoint.Advice.PREFETCH;
                case PREFETCH_WRITE -> Endpoint.Advice.PREFETCH_WRITE;
                case PREFETCH_NO_FAULT -> Endpoint.Advice.PREFETCH_NO_FAULT;
                default -> throw new IllegalArgumentException("advice must be PREFETCH, PREFETCH_WRITE or PREFETCH_NO_FAULT");
            };
            endpoint.advise(sessions.get(request.getEndpoint()).region(request.getLkey()), request.getAddress(), request.getLength(), advice)
                    .whenComplete((done, error) -> {
                        if (error != null) {
                            response.onError(StatusMapping.toStatus(error));
                        } else {
                            response.onNext(AdviseResponse.getDefaultInstance());
                            response.onCompleted();
                        }
                    });
        } catch (RuntimeException e) {
            response.onError(StatusMapping.toStatus(e));
        }
    }
}
