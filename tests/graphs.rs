//! Graph-private pools and stream capture (src/engine/graphs.rs), on the host device
//! (and with `CUMEM_TEST_CUDA=1` on GPU 0, where the capture is the driver's): where
//! allocations made during a capture come from, that their memory is never handed to
//! other code while the pool lives, that it returns to the device when the last
//! reference goes, and every refusal.

mod common;

use common::{MIB, engine};
use cumem::{Error, PoolKind};

const POOLS: [PoolKind; 4] = [PoolKind::Binned, PoolKind::Split, PoolKind::Simple, PoolKind::Expandable];

fn invalid<T: std::fmt::Debug>(r: cumem::Result<T>) -> String {
    match r {
        Err(Error::InvalidValue(m)) => m,
        other => panic!("expected InvalidValue, got {other:?}"),
    }
}

#[test]
fn capture_allocates_from_the_graph_pool_and_reuses_inside_it() {
    for kind in POOLS {
        let e = engine(kind, 1);
        let s = e.stream_create(false).unwrap();
        let pool = e.capture_begin(s, 0).unwrap();
        assert!(e.is_capturing(s));
        let a = e.alloc_on(MIB, s, true).unwrap();
        assert_eq!(e.block_stream(a).unwrap(), pool, "{kind:?}: the block belongs to the graph pool");
        let info = e.graph_pool_info(pool).unwrap();
        assert_eq!((info.active_blocks, info.capturing), (1, 1), "{kind:?}");
        assert!(info.allocated_bytes >= MIB && info.reserved_bytes >= info.allocated_bytes);
        e.free(a).unwrap();
        // freed inside the capture: the next request of the capture reuses it
        let b = e.alloc_on(MIB, s, true).unwrap();
        assert_eq!(a, b, "{kind:?}: a block freed in the capture is reused by the capture");
        let g = e.capture_end(s).unwrap();
        assert!(!e.is_capturing(s));
        assert_eq!(e.graph_pool_of(g).unwrap(), pool);
        e.free(b).unwrap();
        // after the capture the stream's own allocations and the default stream's never
        // get the pool's cached block
        let c = e.alloc_on(MIB, s, true).unwrap();
        let d = e.alloc(MIB).unwrap();
        assert!(c != b && d != b, "{kind:?}: the graph pool's block went to other code");
        assert_eq!(e.block_stream(c).unwrap(), s);
        // reclaim leaves a live pool's cache alone
        e.reclaim(u64::MAX);
        let held = e.graph_pool_info(pool).unwrap().reserved_bytes;
        assert!(held >= MIB, "{kind:?}: reclaim released a live graph pool's memory");
        let before = e.stats().reserved_bytes;
        let x = e.graph_instantiate(g).unwrap();
        e.graph_launch(x, s).unwrap();
        e.graph_destroy(g).unwrap();
        assert!(e.graph_pool_info(pool).is_ok(), "{kind:?}: the executable keeps the pool");
        e.graph_exec_destroy(x).unwrap();
        invalid(e.graph_pool_info(pool));
        assert!(e.graph_pools().is_empty());
        assert!(e.stats().reserved_bytes <= before - held, "{kind:?}: the pool's memory did not return");
        e.free(c).unwrap();
        e.free(d).unwrap();
        e.stream_destroy(s).unwrap();
    }
}

#[test]
fn blocks_live_after_the_pool_goes_return_to_the_device_when_freed() {
    let e = engine(PoolKind::Split, 1);
    let s = e.stream_create(false).unwrap();
    let pool = e.graph_pool_create();
    assert_eq!(e.capture_begin(s, pool).unwrap(), pool);
    let out = e.alloc_on(4 * MIB, s, true).unwrap();
    let g = e.capture_end(s).unwrap();
    e.graph_destroy(g).unwrap();
    assert_eq!(e.graph_pool_info(pool).unwrap().references, 1);
    e.graph_pool_release(pool).unwrap();
    let before = e.stats().reserved_bytes;
    e.free(out).unwrap();
    assert!(e.stats().reserved_bytes < before, "a block of a released pool must go back to the device");
    e.stream_destroy(s).unwrap();
}

#[test]
fn several_graphs_share_one_pool() {
    let e = engine(PoolKind::Binned, 1);
    let s = e.stream_create(false).unwrap();
    let pool = e.graph_pool_create();
    e.capture_begin(s, pool).unwrap();
    let a = e.alloc_on(MIB, s, true).unwrap();
    e.free(a).unwrap();
    let g1 = e.capture_end(s).unwrap();
    e.capture_begin(s, pool).unwrap();
    let b = e.alloc_on(MIB, s, true).unwrap();
    assert_eq!(a, b, "the second graph of the pool reuses the first one's freed block");
    e.free(b).unwrap();
    let g2 = e.capture_end(s).unwrap();
    assert_eq!(e.graph_pool_info(pool).unwrap().references, 3);
    let x = e.graph_instantiate(g1).unwrap();
    e.graph_exec_update(x, g2).unwrap();
    // a graph of another pool cannot update it
    e.capture_begin(s, 0).unwrap();
    let g3 = e.capture_end(s).unwrap();
    assert!(invalid(e.graph_exec_update(x, g3)).contains("pool"));
    for g in [g1, g2, g3] {
        e.graph_destroy(g).unwrap();
    }
    e.graph_exec_destroy(x).unwrap();
    e.graph_pool_release(pool).unwrap();
    assert!(e.graph_pools().is_empty());
    e.stream_destroy(s).unwrap();
}

#[test]
fn refusals_change_nothing() {
    let e = engine(PoolKind::Split, 1);
    let s = e.stream_create(false).unwrap();
    assert!(invalid(e.capture_begin(0, 0)).contains("default stream"));
    invalid(e.capture_begin(s, 12345));
    invalid(e.capture_begin(987_654, 0));
    assert!(!e.is_capturing(s));
    let pool = e.capture_begin(s, 0).unwrap();
    assert!(invalid(e.capture_begin(s, 0)).contains("already"));
    let x0 = {
        // an executable cannot be launched on the stream under capture
        let s2 = e.stream_create(false).unwrap();
        e.capture_begin(s2, 0).unwrap();
        let g = e.capture_end(s2).unwrap();
        let x = e.graph_instantiate(g).unwrap();
        e.graph_destroy(g).unwrap();
        e.stream_destroy(s2).unwrap();
        x
    };
    assert!(invalid(e.graph_launch(x0, s)).contains("captured"));
    e.graph_exec_destroy(x0).unwrap();
    let g = e.capture_end(s).unwrap();
    invalid(e.capture_end(s));
    invalid(e.graph_instantiate(g + 1_000_000));
    invalid(e.graph_launch(777_777, s));
    invalid(e.graph_exec_destroy(777_777));
    invalid(e.graph_pool_release(777_777));
    e.graph_destroy(g).unwrap();
    invalid(e.graph_destroy(g));
    invalid(e.graph_pool_info(pool));
    assert_eq!(e.stats().allocated_bytes, 0);
    e.stream_destroy(s).unwrap();
}

/// The capture's dependency set (`cuStreamGetCaptureInfo` / `cuStreamUpdateCaptureDependencies`)
/// and the graph's shape (`cuGraphGetNodes`, node kinds, edges, longest chain): two
/// memsets made independent roots and a copy joining them is 3 nodes, 2 edges, depth 2 on
/// a GPU; on the host device (graphs recorded above the engine) the set is empty and the
/// shape all 0. Refused for a stream not being captured and an unknown graph.
#[test]
fn capture_dependencies_shape_the_graph() {
    let e = engine(PoolKind::Binned, 1);
    let s = e.stream_create(false).unwrap();
    invalid(e.capture_dependencies(s));
    invalid(e.capture_set_dependencies(s, &[]));
    let a = e.alloc_on(MIB, s, true).unwrap();
    let b = e.alloc_on(MIB, s, true).unwrap();
    e.device().stream_synchronize(s).unwrap();
    e.capture_begin(s, 0).unwrap();
    assert!(e.capture_dependencies(s).unwrap().is_empty(), "nothing queued yet");
    e.memset_async(a, 1, 1, MIB, s).unwrap();
    let after_a = e.capture_dependencies(s).unwrap();
    e.capture_set_dependencies(s, &[]).unwrap(); // the next memset is a root too
    e.memset_async(b, 2, 1, MIB, s).unwrap();
    let after_b = e.capture_dependencies(s).unwrap();
    let both: Vec<u64> = after_a.iter().chain(&after_b).copied().collect();
    e.capture_set_dependencies(s, &both).unwrap();
    e.copy_dtod_async(a, b, MIB, s).unwrap();
    let g = e.capture_end(s).unwrap();
    invalid(e.capture_dependencies(s));
    let info = e.graph_info(g).unwrap();
    if common::cuda() {
        assert_eq!((after_a.len(), after_b.len()), (1, 1));
        assert_ne!(after_a, after_b, "the second memset is a node of its own");
        assert_eq!((info.nodes, info.memsets, info.memcpys, info.kernels, info.others), (3, 2, 1, 0, 0));
        assert_eq!((info.edges, info.depth), (2, 2), "two roots joined by the copy");
        let x = e.graph_instantiate(g).unwrap();
        e.graph_launch(x, s).unwrap();
        e.device().stream_synchronize(s).unwrap();
        // the copy (b into a) ran after both memsets: a holds b's bytes
        assert_eq!(common::read(&e, a, 4), vec![2; 4]);
        assert_eq!(common::read(&e, b, 4), vec![2; 4]);
        e.graph_exec_destroy(x).unwrap();
    } else {
        assert!(after_a.is_empty() && after_b.is_empty());
        assert_eq!(info, cumem::engine::GraphInfo::default());
    }
    invalid(e.graph_info(u64::MAX));
    e.graph_destroy(g).unwrap();
    e.free(a).unwrap();
    e.free(b).unwrap();
}

#[test]
fn timelines_draw_graph_pools_apart() {
    use cumem::timeline::{Format, Options, Timeline};
    let e = engine(PoolKind::Binned, 1);
    e.record_memory_history(true, 1000).unwrap();
    let s = e.stream_create(false).unwrap();
    let outside = e.alloc(MIB).unwrap();
    let pool = e.capture_begin(s, 0).unwrap();
    let inside = e.alloc_on(2 * MIB, s, true).unwrap();
    let g = e.capture_end(s).unwrap();
    assert!(cumem::engine::is_graph_pool_id(pool) && !cumem::engine::is_graph_pool_id(s));
    e.free(inside).unwrap();
    e.graph_destroy(g).unwrap(); // the pool goes: its id still says it was a graph pool
    invalid(e.graph_pool_info(pool));
    let events = e.memory_events();
    let t = Timeline::new(&events, None).unwrap();
    let opts = Options::default();
    let json: serde_json::Value = serde_json::from_str(&t.render(Format::Json, &opts)).unwrap();
    let pools: Vec<(String, serde_json::Value)> = json["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["addr"].as_str().unwrap().to_string(), a["graph_pool"].clone()))
        .collect();
    assert!(pools.contains(&(format!("{inside:#x}"), serde_json::json!(pool))), "{pools:?}");
    assert!(pools.contains(&(format!("{outside:#x}"), serde_json::Value::Null)), "{pools:?}");
    let svg = t.render(Format::Svg, &opts);
    assert_eq!(svg.matches(r#"class="graph-pool""#).count(), 1, "one hatched band");
    assert!(svg.contains("in graph pool") && svg.contains("legend-graph-pool"));
    // with `graph_pools: false` nothing is drawn as a graph pool's
    let plain = t.render(Format::Svg, &Options { graph_pools: false, ..Options::default() });
    assert!(!plain.contains(r#"class="graph-pool""#) && !plain.contains("legend-graph-pool"));
    let html = t.render(Format::Html, &opts);
    assert!(html.contains(&format!(",\"{pool}\",")), "the page's data names the block's pool");
    let chrome = t.render(Format::Chrome, &opts);
    assert_eq!(chrome.matches(r#""cat":"graph_pool""#).count(), 2, "its b and e events");
    e.free(outside).unwrap();
    e.stream_destroy(s).unwrap();
}
