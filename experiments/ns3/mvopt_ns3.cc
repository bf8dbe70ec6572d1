// mvopt_ns3.cc: one mvopt scenario (topology, routes, tasks) simulated by mainline ns-3.44.
//
// Built by experiments/ns3/build.py against the shared libraries and headers of the PyPI package
// ns3==3.44.post0; driven by experiments/ns3/compare.py, which writes the scenario file this
// program reads (format below) and compares what it prints with mvopt's results.
//
// Two modes:
//
// * exact: the line-rate (no congestion control) model of docs/engine.md, on ns-3's own event
//   scheduler, PointToPointNetDevice/PointToPointChannel (serialization ceil-exact at picosecond
//   resolution, propagation delay, store-and-forward), IPv4 and UDP. Every data packet is one
//   UDP datagram whose wire size (PPP 2 + IPv4 20 + UDP 8 + app header + payload) equals mvopt's
//   payload_bytes + header_bytes; the receiver answers every in-order packet with an ACK datagram
//   of exactly ack_bytes on the wire. What mainline ns-3 lacks is added here, as HPCC's ns-3 does
//   for its switches and NICs:
//     - per-flow ECMP: MvRouting, an Ipv4RoutingProtocol that picks the next hop among the
//       equal-cost ports by a hash of (seed, switch, flow), the flow being recovered from the
//       UDP/TCP port pair (the 5-tuple); the hash is mvopt's (splitmix64 chain), so both
//       simulators take the same paths; data packets routed one by one as mvopt's network.lb
//       spray (hash of seed, switch, flow, seq, sends) or adaptive (the shortest data queue,
//       per packet or per flowlet), arrivals of one instant at a switch in ingress-port order;
//     - MvPrioDevice, a PointToPointNetDevice with a strict-priority egress (control = ACKs
//       first, then data, FIFO in each) that decides what to send at the instant the port is
//       free, after every packet arriving at that instant was processed (ns-3 runs same-time
//       events in scheduling order; the decision is a ScheduleNow event, which runs after all
//       events scheduled earlier for that instant, i.e. after every arrival);
//     - on hosts, the NIC pulls data from the active flows round robin (the model has no host
//       data queue), and flows run as tasks with the dependency rule of docs/engine.md; the
//       transport is go-back-N without loss (an ACK per in-order packet) or mvopt's selective
//       repeat (an ACK per data packet, holes retransmitted first; no RTO).
//   The traffic-control layer is bypassed (no queue disc is installed: addresses are assigned by
//   hand, not by Ipv4AddressHelper, which would install one).
//
// * tcp: the same topology, routes and tasks with ns-3's TCP (TcpDctcp, ECN, no timestamps,
//   an ACK per segment) between hosts and RED queue discs marking ECN at a step threshold K on
//   switch ports: the contended scenarios, where the models differ by design. Flows connect
//   during a warm-up before their start, and exchange one byte so that the sender learns the
//   receiver's scaled window (no handshake in the measured time). By default the
//   settings mvopt shares are matched: a flow starts with cwnd = ssthresh = mvopt's window
//   (base-RTT x line rate, no slow start), and pure ACKs (receiver sockets, IP TOS 0x10) go
//   first at every egress (PrioQueueDisc: a FIFO band for ACKs, a RED band for data; hosts: two
//   FIFOs). STOCK bits put ns-3's defaults back: 1 = initial window 10 and slow start, 2 = one
//   FIFO (RED on switches) for ACKs and data.
//
// Scenario file (whitespace separated, one record per line):
//   mode exact|tcp            seed S            window_ps W            stop_ps LIMIT
//   net PAYLOAD HEADER ACK    (bytes; wire size of a data packet = PAYLOAD + HEADER)
//   tcp K_BYTES G MIN_RTO_US QUEUE_BYTES WARMUP_PS STOCK      (tcp mode only; STOCK: bits above)
//   iw TASK SEGMENTS          (tcp mode: initial cwnd = ssthresh, unless STOCK bit 1)
//   nodes N_HOST N_NODE
//   port ID OWNER PEER_NODE PEER_PORT RATE_BPS DELAY_PS        (every port, in id order)
//   route SWITCH DST_HOST COUNT PORT...                          (next-hop ports, global ids)
//   task ID KIND(0 flow,1 delay) SRC DST BYTES DURATION_PS START_PS NPRED PRED...
//   data_first 1              (exact mode, negative control: data before ACKs, not the model)
//   lb ecmp|spray|adaptive    transport gbn|sr    pfc 0|1    flowlet_ps GAP     (exact mode)
//   negative CONTROL          (exact mode, negative controls, not the model): tie_last, adaptive
//                             routing takes the last of equal queues; in_service, its queue measure
//                             counts the data packet in transmission; spray_seed, spraying hashes
//                             with seed + 1; arrival_fifo, simultaneous arrivals at a switch are
//                             routed in ns-3's scheduling order, not by ingress port
//   trace PORT                (tcp mode: print this port's data-queue samples, every 1 us)
// Output (stdout):
//   task ID START_PS FINISH_PS FCT_END_PS     (FCT end: the sender's receipt of the last ACK)
//   counter NAME VALUE
//   qtrace PORT TIME_PS BYTES                 (traced ports)
//   discard TIME_PS           (exact mode: a data packet the receiver discards, a duplicate)
//   qmax PORT BYTES           (largest data queue of a switch port; exact: wire bytes queued
//                             behind the packet in transmission, as mvopt counts; tcp: sampled)
//   done WALL_S EVENTS

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <vector>

using namespace ns3;

namespace
{

constexpr uint16_t PORT_BASE = 1024; // flow f uses UDP/TCP port PORT_BASE + f at both ends
constexpr uint32_t L2L3L4_UDP = 2 + 20 + 8;
constexpr uint8_t PKT_DATA = 0, PKT_ACK = 1;

// ------------------------------------------------------------------ mvopt's counter-based hash
constexpr uint64_t TAG_ECMP = 2, TAG_SPRAY = 3;
constexpr uint32_t SR_WINDOW = 512, SR_DUPTHRESH = 3; // mvopt's schema.SR_WINDOW, SR_DUPTHRESH
constexpr int FLOWLET_ENTRIES = 32;                   // mvopt's schema.FLOWLET_ENTRIES

uint64_t
Mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t
Hash64(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0)
{
    uint64_t h = Mix64(seed);
    for (uint64_t x : {tag, a, b, c, d})
    {
        h = Mix64(h ^ x);
    }
    return h;
}

// ------------------------------------------------------------------ scenario
struct PortRec
{
    int owner, peer, peerPort;
    uint64_t rate;
    int64_t delay;
};

struct TaskRec
{
    int id, kind, src, dst;
    int64_t bytes, dur, start;
    std::vector<int> preds, succ;
    int remaining = 0;
    int64_t readyAt = 0;
    int64_t tStart = -1, tFinish = -1, tFctEnd = -1;
};

struct Scenario
{
    std::string mode = "exact";
    uint64_t seed = 1;
    int64_t window = 0;
    int64_t stop = 0; // simulated-time limit (0: none)
    int dataFirst = 0; // exact mode, negative control: serve data before ACKs (not the model)
    std::string lb = "ecmp";  // ecmp | spray | adaptive (data packets; control packets: ECMP)
    std::string transport = "gbn"; // gbn | sr
    int pfc = 1;              // sr: with PFC, reordering is never taken for loss (no lost_hi)
    int64_t flowletPs = 0;    // adaptive per flowlet: the gap (0: per packet)
    std::string negative;     // exact mode, negative controls (not the model): tie_last | spray_seed
    uint32_t payload = 1000, header = 48, ack = 60;
    int64_t tcpK = 0;
    double tcpG = 1.0 / 16;
    double minRtoUs = 1000;
    int64_t queueBytes = 32 << 20;
    int64_t warmup = 0;
    int stock = 0;
    std::map<int, uint32_t> iw; // task -> initial window (segments)
    int nHost = 0, nNode = 0;
    std::vector<PortRec> ports;
    std::vector<int64_t> nodePortOffset;
    std::map<std::pair<int, int>, std::vector<int>> routes; // (switch, dst) -> global ports
    std::vector<TaskRec> tasks;
    std::vector<int> traced;
};

Scenario S;

Scenario
ReadScenario(const std::string& path)
{
    Scenario s;
    std::ifstream in(path);
    NS_ABORT_MSG_IF(!in, "cannot read " << path);
    std::string line, key;
    while (std::getline(in, line))
    {
        std::istringstream ls(line);
        if (!(ls >> key) || key[0] == '#')
        {
            continue;
        }
        if (key == "mode")
            ls >> s.mode;
        else if (key == "seed")
            ls >> s.seed;
        else if (key == "window_ps")
            ls >> s.window;
        else if (key == "stop_ps")
            ls >> s.stop;
        else if (key == "data_first")
            ls >> s.dataFirst;
        else if (key == "lb")
            ls >> s.lb;
        else if (key == "transport")
            ls >> s.transport;
        else if (key == "pfc")
            ls >> s.pfc;
        else if (key == "flowlet_ps")
            ls >> s.flowletPs;
        else if (key == "negative")
            ls >> s.negative;
        else if (key == "net")
            ls >> s.payload >> s.header >> s.ack;
        else if (key == "tcp")
            ls >> s.tcpK >> s.tcpG >> s.minRtoUs >> s.queueBytes >> s.warmup >> s.stock;
        else if (key == "iw")
        {
            int t;
            uint32_t w;
            ls >> t >> w;
            s.iw[t] = w;
        }
        else if (key == "nodes")
            ls >> s.nHost >> s.nNode;
        else if (key == "port")
        {
            int id;
            PortRec p;
            ls >> id >> p.owner >> p.peer >> p.peerPort >> p.rate >> p.delay;
            NS_ABORT_MSG_IF(id != (int)s.ports.size(), "ports must be listed in id order");
            s.ports.push_back(p);
        }
        else if (key == "route")
        {
            int sw, dst, k;
            ls >> sw >> dst >> k;
            std::vector<int> v(k);
            for (int& x : v)
                ls >> x;
            s.routes[{sw, dst}] = v;
        }
        else if (key == "task")
        {
            TaskRec t;
            int np;
            ls >> t.id >> t.kind >> t.src >> t.dst >> t.bytes >> t.dur >> t.start >> np;
            t.preds.resize(np);
            for (int& x : t.preds)
                ls >> x;
            NS_ABORT_MSG_IF(t.id != (int)s.tasks.size(), "tasks must be listed in id order");
            s.tasks.push_back(t);
        }
        else if (key == "trace")
        {
            int p;
            ls >> p;
            s.traced.push_back(p);
        }
        else
            NS_ABORT_MSG("unknown record " << key);
    }
    s.nodePortOffset.assign(s.nNode + 1, 0);
    for (const auto& p : s.ports)
        s.nodePortOffset[p.owner + 1]++;
    for (int v = 0; v < s.nNode; v++)
        s.nodePortOffset[v + 1] += s.nodePortOffset[v];
    for (auto& t : s.tasks)
    {
        t.remaining = (int)t.preds.size();
        for (int p : t.preds)
            s.tasks[p].succ.push_back(t.id);
    }
    return s;
}

// ------------------------------------------------------------------ app header and class tag
// The app header fills the data packet's header up to mvopt's header_bytes (PPP + IPv4 + UDP
// + this = header_bytes): kind (1 B), flow (4 B), seq (4 B), aux (4 B: a data packet's `sends`,
// the spraying hash input; an ACK's selectively acknowledged packet), zero padding.
class MvHeader : public Header
{
  public:
    static uint32_t s_size;
    uint8_t kind = PKT_DATA;
    uint32_t flow = 0, seq = 0, aux = 0;
    static constexpr uint32_t USED = 13;

    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::MvHeader").SetParent<Header>().AddConstructor<MvHeader>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override { return GetTypeId(); }

    uint32_t GetSerializedSize() const override { return s_size; }

    void Serialize(Buffer::Iterator it) const override
    {
        it.WriteU8(kind);
        it.WriteHtonU32(flow);
        it.WriteHtonU32(seq);
        it.WriteHtonU32(aux);
        for (uint32_t i = USED; i < s_size; i++)
            it.WriteU8(0);
    }

    uint32_t Deserialize(Buffer::Iterator it) override
    {
        kind = it.ReadU8();
        flow = it.ReadNtohU32();
        seq = it.ReadNtohU32();
        aux = it.ReadNtohU32();
        it.Next(s_size - USED);
        return s_size;
    }

    void Print(std::ostream& os) const override
    {
        os << "kind=" << int(kind) << " flow=" << flow << " seq=" << seq << " aux=" << aux;
    }
};

uint32_t MvHeader::s_size = 18;

// Marks control packets (ACKs) for the strict-priority egress; survives forwarding.
class MvCtrlTag : public Tag
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::MvCtrlTag").SetParent<Tag>().AddConstructor<MvCtrlTag>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override { return GetTypeId(); }

    uint32_t GetSerializedSize() const override { return 0; }

    void Serialize(TagBuffer) const override {}

    void Deserialize(TagBuffer) override {}

    void Print(std::ostream& os) const override { os << "ctrl"; }
};

// ------------------------------------------------------------------ routing at switches
// The egress of a packet at a switch (defined after MvPrioDevice, whose queue adaptive routing reads)
int ChoosePort(int node, int dst, Ptr<const Packet> p);

struct Net
{
    std::vector<Ptr<Node>> nodes;
    std::vector<Ptr<NetDevice>> portDev;       // global port id -> device
    std::vector<Ipv4Address> portAddr;         // global port id -> its interface address
    std::unordered_map<uint32_t, int> hostOfIp; // host address -> host id
    std::map<const NetDevice*, int> portOfDev;  // device -> global port id
};

Net N;

class MvRouting : public Ipv4RoutingProtocol
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::MvRouting").SetParent<Ipv4RoutingProtocol>();
        return tid;
    }

    int m_node = -1;
    Ptr<Ipv4> m_ipv4;

    // arrivals at this switch at the current instant, routed together in ingress-port order (as
    // mvopt orders simultaneous arrivals at a node), before any transmission at that instant
    struct Pending
    {
        int ingress;
        Ptr<const Packet> p;
        Ipv4Header header;
        UnicastForwardCallback ucb;
    };

    std::vector<Pending> m_pending;

    void Flush()
    {
        std::vector<Pending> batch;
        batch.swap(m_pending);
        if (S.negative != "arrival_fifo") // negative control: in the order ns-3 scheduled them
            std::stable_sort(batch.begin(), batch.end(),
                             [](const Pending& a, const Pending& b) { return a.ingress < b.ingress; });
        for (const Pending& a : batch)
        {
            int dst = N.hostOfIp.at(a.header.GetDestination().Get());
            int port = ChoosePort(m_node, dst, a.p);
            a.ucb(MakeRoute(port, a.header.GetDestination()), a.p, a.header);
        }
    }

    // the flow id from the L4 port pair at the front of p (both ends use PORT_BASE + flow)
    static int FlowOf(Ptr<const Packet> p)
    {
        uint8_t b[4];
        p->CopyData(b, 4);
        uint16_t sport = (b[0] << 8) | b[1];
        uint16_t dport = (b[2] << 8) | b[3];
        return (sport >= PORT_BASE ? sport : dport) - PORT_BASE;
    }

    Ptr<Ipv4Route> MakeRoute(int port, Ipv4Address dst) const
    {
        Ptr<Ipv4Route> r = Create<Ipv4Route>();
        r->SetDestination(dst);
        r->SetSource(N.portAddr[port]);
        r->SetGateway(N.portAddr[S.ports[port].peerPort]);
        r->SetOutputDevice(N.portDev[port]);
        return r;
    }

    Ptr<Ipv4Route> RouteOutput(Ptr<Packet> p,
                               const Ipv4Header& header,
                               Ptr<NetDevice> oif,
                               Socket::SocketErrno& err) override
    {
        NS_ABORT_MSG_IF(m_node >= S.nHost, "only hosts originate packets");
        err = Socket::ERROR_NOTERROR;
        return MakeRoute((int)S.nodePortOffset[m_node], header.GetDestination());
    }

    bool RouteInput(Ptr<const Packet> p,
                    const Ipv4Header& header,
                    Ptr<const NetDevice> idev,
                    const UnicastForwardCallback& ucb,
                    const MulticastForwardCallback& mcb,
                    const LocalDeliverCallback& lcb,
                    const ErrorCallback& ecb) override
    {
        auto it = N.hostOfIp.find(header.GetDestination().Get());
        NS_ABORT_MSG_IF(it == N.hostOfIp.end(), "destination is not a host: " << header.GetDestination());
        int dst = it->second;
        if (m_node < S.nHost)
        {
            NS_ABORT_MSG_IF(dst != m_node, "a host got a packet for host " << dst);
            lcb(p, header, m_ipv4->GetInterfaceForDevice(idev));
            return true;
        }
        if (S.mode != "exact") // tcp mode: per-flow ECMP at once
        {
            const std::vector<int>& nh = S.routes.at({m_node, dst});
            int port = nh[Hash64(S.seed, TAG_ECMP, m_node, FlowOf(p)) % nh.size()];
            ucb(MakeRoute(port, header.GetDestination()), p, header);
            return true;
        }
        if (m_pending.empty())
            Simulator::ScheduleNow(&MvRouting::Flush, this);
        m_pending.push_back({N.portOfDev.at(PeekPointer(idev)), p, header, ucb});
        return true;
    }

    void NotifyInterfaceUp(uint32_t) override {}

    void NotifyInterfaceDown(uint32_t) override {}

    void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override {}

    void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override {}

    void SetIpv4(Ptr<Ipv4> ipv4) override { m_ipv4 = ipv4; }

    void PrintRoutingTable(Ptr<OutputStreamWrapper>, Time::Unit) const override {}
};

class MvRoutingHelper : public Ipv4RoutingHelper
{
  public:
    MvRoutingHelper* Copy() const override { return new MvRoutingHelper(*this); }

    Ptr<Ipv4RoutingProtocol> Create(Ptr<Node> node) const override
    {
        Ptr<MvRouting> r = CreateObject<MvRouting>();
        r->m_node = (int)node->GetId();
        return r;
    }
};

// ------------------------------------------------------------------ strict-priority egress
class HostStack;

class MvPrioDevice : public PointToPointNetDevice
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::MvPrioDevice")
                                .SetParent<PointToPointNetDevice>()
                                .AddConstructor<MvPrioDevice>();
        return tid;
    }

    struct Item
    {
        Ptr<Packet> p;
        Address dest;
        uint16_t proto;
    };

    std::deque<Item> m_ctrl, m_data;
    bool m_busy = false, m_kickPending = false;
    HostStack* m_host = nullptr; // hosts: data comes from the flows (round robin), not a queue
    uint64_t m_maxDataBytes = 0, m_dataBytes = 0;
    uint64_t m_txDataBytes = 0; // the data packet in transmission (negative control in_service)

    void Start() { TraceConnectWithoutContext("PhyTxEnd", MakeCallback(&MvPrioDevice::TxEnd, this)); }

    bool Send(Ptr<Packet> p, const Address& dest, uint16_t proto) override
    {
        MvCtrlTag tag;
        if (p->PeekPacketTag(tag))
            m_ctrl.push_back({p, dest, proto});
        else
        {
            m_data.push_back({p, dest, proto});
            if (!m_host) // switch data queue, in wire bytes (+2: the PPP header is added later)
            {
                m_dataBytes += p->GetSize() + 2;
                m_maxDataBytes = std::max(m_maxDataBytes, m_dataBytes);
            }
        }
        Wake();
        return true;
    }

    // schedule a transmission decision for now, after every event already due now and after
    // the routing of every arrival at this instant (MvRouting::Flush, itself a ScheduleNow event
    // of an arrival): two ScheduleNow hops, as ns-3 runs same-time events in scheduling order
    void Wake()
    {
        if (!m_busy && !m_kickPending)
        {
            m_kickPending = true;
            Simulator::ScheduleNow(+[](MvPrioDevice* d) { Simulator::ScheduleNow(&MvPrioDevice::Kick, d); },
                                   this);
        }
    }

    void Kick();

    void TxEnd(Ptr<const Packet>)
    {
        m_busy = false;
        m_txDataBytes = 0;
        Wake();
    }
};

std::map<std::pair<int, int>, std::pair<int64_t, int>> flowlets; // (switch, entry) -> (time, port)

// mvopt's network.lb (docs/engine.md, "Switch arrival"): control packets per flow (ECMP); data
// packets per flow (ecmp), per packet by hash(seed, switch, flow, seq, sends) (spray), or
// (adaptive) the next hop whose data queue holds the fewest wire bytes now, the first of equals
// in cyclic order from spraying's choice, per flowlet when flowlet_ps > 0
int
ChoosePort(int node, int dst, Ptr<const Packet> p)
{
    const std::vector<int>& nh = S.routes.at({node, dst});
    size_t n = nh.size();
    uint8_t b[8 + MvHeader::USED]; // UDP header, then the app header
    p->CopyData(b, sizeof b);
    auto u32 = [&](int o) {
        return (uint32_t(b[o]) << 24) | (uint32_t(b[o + 1]) << 16) | (uint32_t(b[o + 2]) << 8) | b[o + 3];
    };
    uint32_t flow = u32(9), seq = u32(13), sends = u32(17);
    if (b[8] != PKT_DATA || S.lb == "ecmp")
        return nh[Hash64(S.seed, TAG_ECMP, node, flow) % n];
    uint64_t seed = S.negative == "spray_seed" ? S.seed + 1 : S.seed;
    size_t k = Hash64(seed, TAG_SPRAY, node, flow, seq, sends) % n;
    if (S.lb == "spray" || n == 1)
        return nh[k];
    NS_ABORT_MSG_IF(S.lb != "adaptive", "unknown lb " << S.lb);
    int best = -1;
    uint64_t bestBytes = 0;
    for (size_t j = 0; j < n; j++)
    {
        int q = nh[(k + j) % n];
        Ptr<MvPrioDevice> d = DynamicCast<MvPrioDevice>(N.portDev[q]);
        // negative control in_service: the packet in transmission counted too
        uint64_t bytes = d->m_dataBytes + (S.negative == "in_service" ? d->m_txDataBytes : 0);
        // negative control tie_last: the last of equals instead of the first
        if (best < 0 || bytes < bestBytes || (S.negative == "tie_last" && bytes == bestBytes))
        {
            best = q;
            bestBytes = bytes;
        }
    }
    if (S.flowletPs > 0)
    {
        int64_t now = Simulator::Now().GetPicoSeconds();
        auto key = std::make_pair(node, (int)(flow % FLOWLET_ENTRIES));
        auto it = flowlets.find(key);
        if (it != flowlets.end() && now - it->second.first < S.flowletPs &&
            std::find(nh.begin(), nh.end(), it->second.second) != nh.end())
            best = it->second.second;
        flowlets[key] = {now, best};
    }
    return best;
}

// ------------------------------------------------------------------ tasks (both modes)
void TaskReady(int id);
void TcpFlowStart(int id);

void
CloseSocket(Ptr<Socket> s)
{
    s->Close();
}

void
TaskFinished(int id)
{
    TaskRec& t = S.tasks[id];
    int64_t now = Simulator::Now().GetPicoSeconds();
    t.tFinish = now;
    for (int s : t.succ)
    {
        TaskRec& u = S.tasks[s];
        int64_t notify = (t.dst == u.src) ? 0 : S.window; // finish node vs start node
        u.readyAt = std::max(u.readyAt, now + notify);
        if (--u.remaining == 0)
        {
            int64_t r = std::max(u.readyAt, u.start);
            if (r == now)
                TaskReady(s);
            else
                Simulator::Schedule(PicoSeconds(r - now), &TaskReady, s);
        }
    }
}

// ------------------------------------------------------------------ exact mode: hosts
struct FlowState
{
    int task = -1, src = -1, dst = -1;
    int64_t size = 0;
    uint32_t n = 0, sndNxt = 0, sndUna = 0, expected = 0;
    // selective repeat (docs/engine.md): sender's sacked set, lost_hi, rtx_nxt; receiver's set
    // of packets received beyond `expected`; `sends` (the spraying hash input), `maxSent`
    // (what was sent before: a retransmission)
    uint32_t sends = 0, lostHi = 0, rtxNxt = 0, maxSent = 0;
    std::set<uint32_t> sacked, received;
    bool done = false;    // the sender has every packet acknowledged
    int64_t inFlight = 0; // the flow's data packets and ACKs on their way: sockets close at 0
    Ptr<Socket> tx, rx;

    static bool Sr() { return S.transport == "sr"; }

    bool RetxDue() const { return Sr() && rtxNxt < std::min(lostHi, sndNxt); }

    void Settle()
    {
        uint32_t r = std::max(rtxNxt, sndUna);
        while (r < std::min(lostHi, sndNxt) && sacked.count(r))
            r++;
        rtxNxt = r;
    }

    bool CanSend() const
    {
        if (done)
            return false;
        if (RetxDue())
            return true;
        if (Sr() && sndNxt - sndUna >= SR_WINDOW)
            return false;
        return sndNxt < n;
    }
};

std::vector<FlowState> flows; // by task id (delay tasks unused)
uint64_t nRetransmitted = 0, nOutOfOrder = 0; // mvopt's data_packets_retransmitted, out_of_order_packets


class HostStack
{
  public:
    int m_id;
    Ptr<MvPrioDevice> m_dev;
    std::set<int> m_active; // flow ids
    int m_lastServed = -1;

    // the next flow in round-robin order after the last one served that can send: its due
    // retransmission (selective repeat), else its next new packet
    bool SendNextData()
    {
        if (m_active.empty())
            return false;
        auto it = m_active.upper_bound(m_lastServed);
        for (size_t k = 0; k < m_active.size(); k++, it++)
        {
            if (it == m_active.end())
                it = m_active.begin();
            FlowState& f = flows[*it];
            if (!f.CanSend())
                continue;
            uint32_t seq;
            if (f.RetxDue())
            {
                seq = f.rtxNxt;
                f.rtxNxt = seq + 1;
                f.Settle();
            }
            else
                seq = f.sndNxt++;
            if (seq < f.maxSent)
                nRetransmitted++;
            f.maxSent = std::max(f.maxSent, seq + 1);
            uint32_t pay = (uint32_t)std::min<int64_t>(S.payload, f.size - (int64_t)seq * S.payload);
            Ptr<Packet> p = Create<Packet>(pay);
            MvHeader h;
            h.kind = PKT_DATA;
            h.flow = f.task;
            h.seq = seq;
            h.aux = f.sends++;
            p->AddHeader(h);
            m_lastServed = f.task;
            f.inFlight++;
            int r = f.tx->Send(p);
            NS_ABORT_MSG_IF(r < 0, "UDP send failed");
            return true;
        }
        return false;
    }

    void SendAck(FlowState& f, uint32_t sacked)
    {
        Ptr<Packet> a = Create<Packet>(S.ack - L2L3L4_UDP - MvHeader::s_size);
        MvHeader ah;
        ah.kind = PKT_ACK;
        ah.flow = f.task;
        ah.seq = f.expected;
        ah.aux = sacked;
        a->AddHeader(ah);
        a->AddPacketTag(MvCtrlTag());
        f.inFlight++;
        NS_ABORT_MSG_IF(f.rx->Send(a) < 0, "UDP send failed");
    }

    // go-back-N: an ACK per in-order packet (no loss: nothing else arrives); selective repeat:
    // every packet acknowledged with ACK(expected, seq), new ones delivered
    void OnData(FlowState& f, const MvHeader& h)
    {
        NS_ABORT_MSG_IF(f.dst != m_id, "data at the wrong host");
        uint32_t s = h.seq, e = f.expected;
        bool fresh;
        if (!FlowState::Sr())
        {
            fresh = s == e;
            if (!fresh)
            {
                nOutOfOrder++; // cannot happen on one FIFO path without loss
                return;
            }
            f.expected++;
        }
        else
        {
            fresh = s == e || (e < s && s < e + SR_WINDOW && !f.received.count(s));
            if (!fresh)
            {
                nOutOfOrder++;
                printf("discard %" PRId64 "\n", Simulator::Now().GetPicoSeconds());
            }
            else if (s == e)
            {
                f.expected++;
                while (f.received.erase(f.expected))
                    f.expected++;
            }
            else
                f.received.insert(s);
        }
        SendAck(f, s);
        if (fresh && s == e && f.expected == f.n)
            TaskFinished(f.task);
    }

    void OnAck(FlowState& f, const MvHeader& h)
    {
        if (f.done)
            return;
        if (h.seq > f.sndUna)
            f.sndUna = h.seq;
        if (FlowState::Sr())
        {
            if (h.aux >= f.sndUna) // received out of order: a hole below it
            {
                f.sacked.insert(h.aux);
                if (!S.pfc && h.aux + 1 >= SR_DUPTHRESH)
                    f.lostHi = std::max(f.lostHi, h.aux - SR_DUPTHRESH + 1);
            }
            f.sacked.erase(f.sacked.begin(), f.sacked.lower_bound(f.sndUna));
            f.Settle();
        }
        if (f.sndUna == f.n)
        {
            f.done = true;
            S.tasks[f.task].tFctEnd = Simulator::Now().GetPicoSeconds();
            m_active.erase(f.task);
        }
        else
            m_dev->Wake(); // a retransmission may have become due
    }

    void OnRecv(Ptr<Socket> sock)
    {
        Ptr<Packet> p;
        while ((p = sock->Recv()))
        {
            MvHeader h;
            p->RemoveHeader(h);
            FlowState& f = flows[h.flow];
            f.inFlight--;
            if (h.kind == PKT_DATA)
                OnData(f, h);
            else
                OnAck(f, h);
            if (f.done && f.inFlight == 0 && f.tx)
            {
                // not from inside their own callbacks
                Simulator::ScheduleNow(&CloseSocket, f.tx);
                Simulator::ScheduleNow(&CloseSocket, f.rx);
                f.tx = f.rx = nullptr;
            }
        }
    }
};

std::vector<HostStack*> hosts;

// A flow's two UDP sockets exist only while it runs (ns-3's endpoint demux is a linear list:
// thousands of idle sockets per host would make every delivery slow; no effect on timing).
void
OpenFlowSockets(int id)
{
    FlowState& f = flows[id];
    uint16_t port = PORT_BASE + id;
    Ipv4Address sa = N.portAddr[S.nodePortOffset[f.src]], da = N.portAddr[S.nodePortOffset[f.dst]];
    f.tx = Socket::CreateSocket(N.nodes[f.src], UdpSocketFactory::GetTypeId());
    f.rx = Socket::CreateSocket(N.nodes[f.dst], UdpSocketFactory::GetTypeId());
    NS_ABORT_IF(f.tx->Bind(InetSocketAddress(sa, port)) < 0);
    NS_ABORT_IF(f.rx->Bind(InetSocketAddress(da, port)) < 0);
    f.tx->Connect(InetSocketAddress(da, port));
    f.rx->Connect(InetSocketAddress(sa, port));
    f.tx->SetRecvCallback(MakeCallback(&HostStack::OnRecv, hosts[f.src]));
    f.rx->SetRecvCallback(MakeCallback(&HostStack::OnRecv, hosts[f.dst]));
}

void
MvPrioDevice::Kick()
{
    // m_kickPending stays set while deciding: the Send() below must not schedule another kick
    if (!m_busy && m_data.empty() && (m_ctrl.empty() || S.dataFirst) && m_host)
        m_host->SendNextData(); // goes down UDP/IPv4 into Send(): lands in m_data
    m_kickPending = false;
    if (m_busy)
        return;
    std::deque<Item>* first = S.dataFirst ? &m_data : &m_ctrl;
    std::deque<Item>* second = S.dataFirst ? &m_ctrl : &m_data;
    std::deque<Item>* q = !first->empty() ? first : (!second->empty() ? second : nullptr);
    if (!q)
        return;
    Item it = q->front();
    q->pop_front();
    if (q == &m_data && !m_host)
    {
        m_dataBytes -= it.p->GetSize() + 2;
        m_txDataBytes = it.p->GetSize() + 2;
    }
    m_busy = true;
    bool ok = PointToPointNetDevice::Send(it.p, it.dest, it.proto);
    NS_ABORT_MSG_IF(!ok, "device refused a packet");
}

void
TaskReady(int id)
{
    TaskRec& t = S.tasks[id];
    t.tStart = Simulator::Now().GetPicoSeconds();
    if (t.kind == 1)
    {
        if (t.dur == 0)
            TaskFinished(id);
        else
            Simulator::Schedule(PicoSeconds(t.dur), &TaskFinished, id);
        return;
    }
    if (S.mode == "exact")
    {
        OpenFlowSockets(id);
        HostStack* h = hosts[t.src];
        h->m_active.insert(id);
        h->m_dev->Wake();
    }
    else
        TcpFlowStart(id);
}

// ------------------------------------------------------------------ tcp mode
struct TcpFlow
{
    Ptr<Socket> tx, rx;
    int64_t received = 0;
    uint64_t toSend = 0;
    bool started = false, helloAcked = false;
};

std::vector<TcpFlow> tcpFlows;
std::vector<Ptr<QueueDisc>> dataQd; // per port: the queue disc holding data (RED on switches)
std::vector<uint32_t> qMax;        // per port: largest sampled data backlog (bytes)

void
TcpTrySend(int id)
{
    TcpFlow& f = tcpFlows[id];
    while (f.toSend > 0)
    {
        uint32_t avail = f.tx->GetTxAvailable();
        if (avail == 0)
            return;
        uint32_t k = (uint32_t)std::min<uint64_t>(avail, f.toSend);
        int r = f.tx->Send(Create<Packet>(k));
        if (r <= 0)
            return;
        f.toSend -= r;
    }
}

void
TcpFlowStart(int id)
{
    TcpFlow& f = tcpFlows[id];
    NS_ABORT_MSG_IF(!f.helloAcked, "flow " << id << " not connected by the end of the warm-up");
    f.started = true;
    f.toSend = S.tasks[id].bytes;
    TcpTrySend(id);
}

void
TcpOnRecv(int id, Ptr<Socket> sock)
{
    TcpFlow& f = tcpFlows[id];
    Ptr<Packet> p;
    while ((p = sock->Recv()))
    {
        f.received += p->GetSize();
    }
    if (f.received == S.tasks[id].bytes + 1 && S.tasks[id].tFinish < 0) // + the warm-up byte
        TaskFinished(id);
}

void
TcpOnAck(int id, SequenceNumber32, SequenceNumber32 now)
{
    // sequence 1 is the warm-up byte (after the SYN), the flow's data starts at 2
    if (now.GetValue() >= 2)
        tcpFlows[id].helloAcked = true;
    if (now.GetValue() >= S.tasks[id].bytes + 2 && S.tasks[id].tFctEnd < 0 && tcpFlows[id].started)
        S.tasks[id].tFctEnd = Simulator::Now().GetPicoSeconds();
}

bool
FlowsPending()
{
    for (const auto& t : S.tasks)
        if (t.kind == 0 && t.tFctEnd < 0)
            return true;
    return false;
}

// every `period`: the data backlog of every switch port (max kept), printed for traced ports
void
SampleQueues(int64_t period)
{
    int64_t now = Simulator::Now().GetPicoSeconds() - S.warmup;
    for (size_t p = 0; p < dataQd.size(); p++)
    {
        if (!dataQd[p])
            continue;
        uint32_t b = dataQd[p]->GetNBytes();
        qMax[p] = std::max(qMax[p], b);
        if (std::find(S.traced.begin(), S.traced.end(), (int)p) != S.traced.end())
            printf("qtrace %zu %" PRId64 " %u\n", p, now, b);
    }
    if (FlowsPending())
        Simulator::Schedule(PicoSeconds(period), &SampleQueues, period);
}

} // namespace

int
main(int argc, char** argv)
{
    Time::SetResolution(Time::PS); // before any Time exists: 1 B at 100 Gb/s is 80 ps
    auto wall0 = std::chrono::steady_clock::now();
    std::string path = argc > 1 ? argv[1] : "scenario.txt";
    S = ReadScenario(path);
    bool exact = S.mode == "exact";
    MvHeader::s_size = S.header - L2L3L4_UDP;
    NS_ABORT_MSG_IF(exact && (S.header < L2L3L4_UDP + MvHeader::USED || S.ack < S.header),
                    "exact mode needs header_bytes >= 43 and ack_bytes >= header_bytes");

    if (!exact)
    {
        Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpDctcp::GetTypeId()));
        Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(S.payload));
        Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
        Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(64 << 20));
        Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(64 << 20));
        Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
        Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));
        Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MicroSeconds(S.minRtoUs)));
        Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MicroSeconds(1)));
        Config::SetDefault("ns3::TcpSocketBase::UseEcn", StringValue("On"));
        Config::SetDefault("ns3::TcpDctcp::DctcpShiftG", DoubleValue(S.tcpG));
        Config::SetDefault("ns3::RedQueueDisc::UseEcn", BooleanValue(true));
        Config::SetDefault("ns3::RedQueueDisc::UseHardDrop", BooleanValue(false));
        Config::SetDefault("ns3::RedQueueDisc::QW", DoubleValue(1.0));
        Config::SetDefault("ns3::RedQueueDisc::MeanPktSize", UintegerValue(S.payload + S.header));
    }

    // nodes and the IPv4 stack with per-flow ECMP routing on every node
    for (int v = 0; v < S.nNode; v++)
        N.nodes.push_back(CreateObject<Node>());
    InternetStackHelper stack;
    stack.SetIpv6StackInstall(false);
    stack.SetRoutingHelper(MvRoutingHelper());
    for (auto& node : N.nodes)
        stack.Install(node);

    // one device per port, in port order, so that a node's device i is its i-th port
    int nPort = (int)S.ports.size();
    N.portDev.resize(nPort);
    N.portAddr.resize(nPort);
    for (int p = 0; p < nPort; p++)
    {
        const PortRec& r = S.ports[p];
        Ptr<PointToPointNetDevice> d;
        if (exact)
        {
            Ptr<MvPrioDevice> m = CreateObject<MvPrioDevice>();
            d = m;
        }
        else
            d = CreateObject<PointToPointNetDevice>();
        d->SetAttribute("DataRate", DataRateValue(DataRate(r.rate)));
        d->SetAddress(Mac48Address::Allocate());
        d->SetMtu(9000);
        Ptr<DropTailQueue<Packet>> q = CreateObject<DropTailQueue<Packet>>();
        // tcp mode: a one-packet device queue, so that the backlog sits in the queue disc
        q->SetMaxSize(QueueSize(exact ? "100p" : "1p"));
        d->SetQueue(q);
        if (!exact)
        {
            // flow control between queue disc and device queue (as PointToPointHelper does)
            Ptr<NetDeviceQueueInterface> ndqi = CreateObject<NetDeviceQueueInterface>();
            ndqi->GetTxQueue(0)->ConnectQueueTraces(q);
            d->AggregateObject(ndqi);
        }
        N.nodes[r.owner]->AddDevice(d);
        N.portDev[p] = d;
        N.portOfDev[PeekPointer(d)] = p;
    }
    for (int p = 0; p < nPort; p++)
    {
        const PortRec& r = S.ports[p];
        if (p > r.peerPort)
            continue;
        NS_ABORT_MSG_IF(S.ports[r.peerPort].delay != r.delay, "asymmetric link delay");
        Ptr<PointToPointChannel> ch = CreateObject<PointToPointChannel>();
        ch->SetAttribute("Delay", TimeValue(PicoSeconds(r.delay)));
        DynamicCast<PointToPointNetDevice>(N.portDev[p])->Attach(ch);
        DynamicCast<PointToPointNetDevice>(N.portDev[r.peerPort])->Attach(ch);
        // link l = its lower port: a /30 per link, 10.0.0.0/8
        uint32_t base = 0x0A000000u + 4u * (uint32_t)p;
        N.portAddr[p] = Ipv4Address(base + 1);
        N.portAddr[r.peerPort] = Ipv4Address(base + 2);
    }
    // tcp mode: queue discs before the addresses (ns-3's order). Switch ports: RED marking ECN
    // at the step threshold K (instantaneous queue: QW 1; not gentle; MaxTh just above MinTh;
    // thresholds and limit in packets of payload + header bytes). Host NICs: FIFO.
    // Unless stock, both under a PrioQueueDisc whose band 0 (a FIFO) takes priority-6 packets,
    // the receivers' pure ACKs, so that ACKs go first as in mvopt.
    std::vector<Ptr<QueueDisc>> portQd(nPort);
    if (!exact)
    {
        double kPkts = double(S.tcpK) / (S.payload + S.header);
        uint32_t limit = (uint32_t)(S.queueBytes / (S.payload + S.header));
        QueueSizeValue big(QueueSize("1000000p"));
        auto redArgs = [&](TrafficControlHelper& h, uint16_t handle, uint16_t cls, bool root) {
            auto args = std::make_tuple(
                "MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, limit)),
                "MinTh", DoubleValue(kPkts), "MaxTh", DoubleValue(kPkts + 1e-3),
                "Gentle", BooleanValue(false),
                "LinkBandwidth", DataRateValue(DataRate(S.ports[0].rate)),
                "LinkDelay", TimeValue(PicoSeconds(S.ports[0].delay)));
            std::apply([&](auto&&... a) {
                if (root)
                    h.SetRootQueueDisc("ns3::RedQueueDisc", a...);
                else
                    h.AddChildQueueDisc(handle, cls, "ns3::RedQueueDisc", a...);
            }, args);
        };
        TrafficControlHelper sw, host;
        if (S.stock & 2)
        {
            redArgs(sw, 0, 0, true);
            host.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", big);
        }
        else
        {
            for (TrafficControlHelper* h : {&sw, &host})
            {
                uint16_t handle = h->SetRootQueueDisc(
                    "ns3::PrioQueueDisc", "Priomap", StringValue("1 1 1 1 1 1 0 1 1 1 1 1 1 1 1 1"));
                auto cls = h->AddQueueDiscClasses(handle, 2, "ns3::QueueDiscClass");
                h->AddChildQueueDisc(handle, cls[0], "ns3::FifoQueueDisc", "MaxSize", big);
                if (h == &sw)
                    redArgs(*h, handle, cls[1], false);
                else
                    h->AddChildQueueDisc(handle, cls[1], "ns3::FifoQueueDisc", "MaxSize", big);
            }
        }
        dataQd.resize(nPort);
        qMax.assign(nPort, 0);
        for (int p = 0; p < nPort; p++)
        {
            NetDeviceContainer c(N.portDev[p]);
            bool isHost = S.ports[p].owner < S.nHost;
            portQd[p] = (isHost ? host : sw).Install(c).Get(0);
            if (!isHost)
                dataQd[p] = (S.stock & 2) ? portQd[p] : portQd[p]->GetQueueDiscClass(1)->GetQueueDisc();
        }
    }
    for (int v = 0; v < S.nNode; v++)
    {
        Ptr<Ipv4> ip = N.nodes[v]->GetObject<Ipv4>();
        for (int64_t p = S.nodePortOffset[v]; p < S.nodePortOffset[v + 1]; p++)
        {
            uint32_t i = ip->AddInterface(N.portDev[p]);
            ip->AddAddress(i, Ipv4InterfaceAddress(N.portAddr[p], Ipv4Mask("255.255.255.252")));
            ip->SetUp(i);
        }
    }
    for (int h = 0; h < S.nHost; h++)
        N.hostOfIp[N.portAddr[S.nodePortOffset[h]].Get()] = h;
    if (exact)
    {
        for (int p = 0; p < nPort; p++)
            DynamicCast<MvPrioDevice>(N.portDev[p])->Start();
    }

    // flows: per-flow sockets at both ends, port PORT_BASE + flow (the ECMP hash key)
    int nTask = (int)S.tasks.size();
    NS_ABORT_MSG_IF(nTask + PORT_BASE > 65535, "too many tasks for 16-bit ports");
    if (exact)
    {
        flows.resize(nTask);
        hosts.resize(S.nHost);
        for (int h = 0; h < S.nHost; h++)
        {
            hosts[h] = new HostStack();
            hosts[h]->m_id = h;
            Ptr<MvPrioDevice> d = DynamicCast<MvPrioDevice>(N.portDev[S.nodePortOffset[h]]);
            d->m_host = hosts[h];
            hosts[h]->m_dev = d;
        }
    }
    else
        tcpFlows.resize(nTask);
    for (auto& t : S.tasks)
    {
        if (t.kind != 0)
            continue;
        uint16_t port = PORT_BASE + t.id;
        Ipv4Address sa = N.portAddr[S.nodePortOffset[t.src]], da = N.portAddr[S.nodePortOffset[t.dst]];
        if (exact)
        {
            FlowState& f = flows[t.id];
            f.task = t.id;
            f.src = t.src;
            f.dst = t.dst;
            f.size = t.bytes;
            f.n = (uint32_t)((t.bytes + S.payload - 1) / S.payload);
        }
        else
        {
            TcpFlow& f = tcpFlows[t.id];
            f.rx = Socket::CreateSocket(N.nodes[t.dst], TcpSocketFactory::GetTypeId());
            NS_ABORT_IF(f.rx->Bind(InetSocketAddress(da, port)) < 0);
            f.rx->Listen();
            int id = t.id;
            f.rx->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                    MakeCallback(+[](int id, Ptr<Socket> s, const Address&) {
                                        s->SetRecvCallback(MakeCallback(&TcpOnRecv).Bind(id));
                                        if (!(S.stock & 2))
                                        {
                                            // its pure ACKs go to band 0: priority 6 at the
                                            // host, IP TOS 0x10 (low delay) -> priority 6 where
                                            // switches forward (Ipv4L3Protocol::IpForward)
                                            s->SetIpTos(0x10);
                                            s->SetPriority(6);
                                        }
                                    }).Bind(id));
            f.tx = Socket::CreateSocket(N.nodes[t.src], TcpSocketFactory::GetTypeId());
            if (!(S.stock & 1))
            {
                uint32_t w = S.iw.at(t.id);
                f.tx->SetAttribute("InitialCwnd", UintegerValue(w));
                f.tx->SetAttribute("InitialSlowStartThreshold", UintegerValue(w * S.payload));
            }
            NS_ABORT_IF(f.tx->Bind(InetSocketAddress(sa, port)) < 0);
            f.tx->SetSendCallback(MakeCallback(+[](int id, Ptr<Socket>, uint32_t) { TcpTrySend(id); }).Bind(id));
            f.tx->TraceConnectWithoutContext("HighestRxAck", MakeCallback(&TcpOnAck).Bind(id));
            // connect during the warm-up: the handshake is not part of the measured flow. Once
            // connected, send one byte: its ACK tells the sender the receiver's scaled window (a
            // SYN's window is never scaled: without this the first flight stops at 64 KB)
            f.tx->SetConnectCallback(
                MakeCallback(+[](int id, Ptr<Socket> s) { s->Send(Create<Packet>(1)); }).Bind(id),
                MakeCallback(+[](int id, Ptr<Socket>) { NS_ABORT_MSG("flow " << id << " failed to connect"); })
                    .Bind(id));
            Simulator::Schedule(PicoSeconds(0), [id, da, port]() {
                tcpFlows[id].tx->Connect(InetSocketAddress(da, port));
            });
        }
    }
    int64_t t0 = exact ? 0 : S.warmup;
    for (auto& t : S.tasks)
    {
        if (t.remaining == 0)
        {
            int id = t.id;
            Simulator::Schedule(PicoSeconds(t0 + t.start), &TaskReady, id);
        }
    }
    if (!exact)
    {
        Simulator::Schedule(PicoSeconds(t0), &SampleQueues, (int64_t)1000000);
    }

    if (S.stop > 0)
        Simulator::Stop(PicoSeconds(t0 + S.stop));
    Simulator::Run();
    uint64_t events = Simulator::GetEventCount();
    Simulator::Destroy();

    for (const auto& t : S.tasks)
    {
        auto sub = [&](int64_t x) { return x < 0 ? x : x - t0; };
        printf("task %d %" PRId64 " %" PRId64 " %" PRId64 "\n", t.id, sub(t.tStart), sub(t.tFinish),
               sub(t.tFctEnd));
    }
    if (exact)
    {
        for (int p = 0; p < nPort; p++)
        {
            uint64_t m = DynamicCast<MvPrioDevice>(N.portDev[p])->m_maxDataBytes;
            if (m > 0)
                printf("qmax %d %" PRIu64 "\n", p, m);
        }
        printf("counter data_packets_retransmitted %" PRIu64 "\n", nRetransmitted);
        printf("counter out_of_order_packets %" PRIu64 "\n", nOutOfOrder);
    }
    else
    {
        uint64_t drops = 0, marks = 0, ackBand = 0;
        for (int p = 0; p < nPort; p++)
        {
            drops += portQd[p]->GetStats().nTotalDroppedPackets;
            if (dataQd[p])
            {
                marks += dataQd[p]->GetStats().nTotalMarkedPackets;
                if (qMax[p] > 0)
                    printf("qmax %d %u\n", p, qMax[p]);
            }
            if (!(S.stock & 2))
                ackBand += portQd[p]->GetQueueDiscClass(0)->GetQueueDisc()->GetStats().nTotalReceivedPackets;
        }
        printf("counter ecn_marks %" PRIu64 "\n", marks);
        printf("counter queue_disc_drops %" PRIu64 "\n", drops);
        printf("counter ack_band_packets %" PRIu64 "\n", ackBand);
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    printf("done %.3f %" PRIu64 "\n", wall, events);
    return 0;
}
