// The console's pages, in navigation order. A page is one module under pages/ with a
// default export { path, title, nav?, navHref?, render(ctx) }: adding a page is that
// file and its line here.
import overview from './pages/overview.js';
import topics from './pages/topics.js';
import topic from './pages/topic.js';
import records from './pages/records.js';
import groups from './pages/groups.js';
import group from './pages/group.js';
import shareGroups from './pages/share-groups.js';
import shareGroup from './pages/share-group.js';
import connectors from './pages/connectors.js';
import connector from './pages/connector.js';
import security from './pages/security.js';

export default [overview, topics, topic, records, groups, group, shareGroups, shareGroup, connectors, connector, security];
