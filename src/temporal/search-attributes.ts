// Typed keys of Kiln's search attributes: what the Web UI filters on and the Temporal fallback reads.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { SEARCH_ATTRIBUTES } from '../shared/task.js';

export const SA = {
  owner: defineSearchAttributeKey(SEARCH_ATTRIBUTES.owner, SearchAttributeType.KEYWORD),
  model: defineSearchAttributeKey(SEARCH_ATTRIBUTES.model, SearchAttributeType.KEYWORD),
  status: defineSearchAttributeKey(SEARCH_ATTRIBUTES.status, SearchAttributeType.KEYWORD),
};
