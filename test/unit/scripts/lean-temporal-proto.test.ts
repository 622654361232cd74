// The API bundle's @temporalio/proto leaves out the Cloud API and the worker's core protocol
// (scripts/lean-temporal-proto.ts). What stays must resolve on its own: a kept message that pointed
// into a removed namespace would fail `resolveAll`, the check protobufjs runs on first use.
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { leanProtoSource } from '../../../scripts/lean-temporal-proto.js';

const require = createRequire(import.meta.url);
const protoModule = require.resolve('@temporalio/proto/protos/json-module.js');
const protobuf = createRequire(protoModule)('protobufjs/light') as typeof import('protobufjs');

type Root = InstanceType<typeof protobuf.Root>;
const full = (): Root => require(protoModule) as Root;

// Runs the generated module the way the bundle does, against a fresh protobufjs root registry.
function loadLean(): Root {
  const source = leanProtoSource(full());
  const mod = { exports: {} as Root };
  const roots: Record<string, Root> = {};
  const fakeRequire = (id: string) => {
    expect(id).toBe('protobufjs/light');
    return { ...protobuf, roots };
  };
  new Function('require', 'module', source)(fakeRequire, mod);
  return mod.exports;
}

describe('the lean Temporal protos of the API bundle', () => {
  const lean = loadLean();

  it('leaves out the Cloud API and the core protocol, and resolves every type that stays', () => {
    expect(lean.lookup('coresdk')).toBeNull();
    expect(lean.lookup('temporal.api.cloud')).toBeNull();
    expect(() => lean.resolveAll()).not.toThrow();
  });

  it('keeps every service the client builds at load, and the messages Kiln reads', () => {
    for (const name of [
      'temporal.api.workflowservice.v1.WorkflowService',
      'temporal.api.operatorservice.v1.OperatorService',
      'temporal.api.testservice.v1.TestService',
      'grpc.health.v1.Health',
      'temporal.api.errordetails.v1.WorkflowExecutionAlreadyStartedFailure',
      'temporal.api.history.v1.History',
      'temporal.api.failure.v1.Failure',
    ]) {
      expect(lean.lookup(name), name).not.toBeNull();
    }
  });

  it('encodes a start request to the same bytes as the full protos', () => {
    const message = {
      namespace: 'default',
      workflowId: 'task-1',
      workflowType: { name: 'imageTaskWorkflow' },
      taskQueue: { name: 'kiln' },
      input: { payloads: [{ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('{}') }] },
      searchAttributes: { indexedFields: { KilnOwner: { data: Buffer.from('"o"') } } },
    };
    const bytes = (root: Root) => {
      const type = root.lookupType('temporal.api.workflowservice.v1.StartWorkflowExecutionRequest');
      return Buffer.from(type.encode(type.fromObject(message)).finish()).toString('hex');
    };
    expect(bytes(lean)).toBe(bytes(full()));
  });

  it('is smaller than the full set by the two namespaces', () => {
    const count = (root: Root) => {
      let types = 0;
      const walk = (ns: { nestedArray?: unknown[] }) => {
        for (const child of ns.nestedArray ?? []) {
          if (child instanceof protobuf.Type) types++;
          walk(child as { nestedArray?: unknown[] });
        }
      };
      walk(root);
      return types;
    };
    const [inFull, inLean] = [count(full()), count(lean)];
    expect(inLean).toBeLessThan(inFull * 0.85);
    expect(inLean).toBeGreaterThan(inFull * 0.5);
  });
});
