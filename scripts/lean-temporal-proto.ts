// An esbuild plugin for the API bundle: @temporalio/proto without the namespaces a Temporal client
// never reads. The package builds one protobufjs Root of every message at load: the client's
// services, but also the Cloud operations API (`temporal.api.cloud`, ~260 types, used only by
// @temporalio/cloud) and the worker's core protocol (`coresdk`, ~90 types). Each API process kept
// their reflection objects (~1.2 MiB of heap, measured with Root.fromJSON and a full collection)
// and their text in the bundle (~150 KB). The worker loads the package whole from node_modules.
//
// The module is rebuilt from the installed package at build time, so it follows its version: the
// same Root, serialised with protobufjs's own toJSON and loaded with addJSON, minus those two
// subtrees. A kept message that points into them would fail protobufjs's resolve on first use:
// test/unit/scripts/lean-temporal-proto.test.ts resolves every kept type and compares encodings
// with the full set; test/integration/build/bundle.test.ts loads the built bundle.
import { createRequire } from 'node:module';
import type { Plugin } from 'esbuild';

/** Namespaces, as paths of nested names, left out of the API's protos. */
export const LEFT_OUT = [['coresdk'], ['temporal', 'api', 'cloud']] as const;

type Nested = { nested?: Record<string, Nested> };

export function leanProtoSource(fullRoot: { toJSON(): object }): string {
  const json = fullRoot.toJSON() as Nested;
  for (const path of LEFT_OUT) {
    let at: Nested | undefined = json;
    for (const name of path.slice(0, -1)) at = at?.nested?.[name];
    const last = path[path.length - 1];
    if (!at?.nested?.[last]) throw new Error(`@temporalio/proto has no ${path.join('.')}: update LEFT_OUT`);
    delete at.nested[last];
  }
  // The shape pbjs's json-module target writes: the shared "__temporal" root, filled from JSON.
  return [
    '"use strict";',
    'var $protobuf = require("protobufjs/light");',
    'var $root = ($protobuf.roots["__temporal"] || ($protobuf.roots["__temporal"] = new $protobuf.Root()))',
    `.addJSON(${JSON.stringify(json.nested)});`,
    'module.exports = $root;',
  ].join('\n');
}

export function leanTemporalProto(): Plugin {
  return {
    name: 'lean-temporal-proto',
    setup(build) {
      build.onLoad({ filter: /[\\/]@temporalio[\\/]proto[\\/]protos[\\/]json-module\.js$/ }, (args) => {
        const full = createRequire(args.path)(args.path) as { toJSON(): object };
        return { contents: leanProtoSource(full), loader: 'js', resolveDir: args.path.replace(/[\\/][^\\/]+$/, '') };
      });
    },
  };
}
