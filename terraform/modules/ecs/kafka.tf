# Kafka clients, in shared-address mode: one Network Load Balancer forwards TCP on 9092
# to every node's Kafka listener, and every node advertises the balancer's address as
# every broker's (--kafka-shared-address). Clients still see one broker per node id and
# open a connection per broker, each landing on some node; every node accepts every
# partition, so it does not matter which. Off unless kafka = true.

locals {
  kafka_port = 9092
  # TLS at the balancer with the HTTPS certificate; plain TCP only in the trials mode
  # that also allows plain HTTP (aws_lb.this refuses neither without the other).
  kafka_protocol = var.certificate_arn == null ? "TCP" : "TLS"
  # What clients bootstrap at and every broker is advertised as.
  kafka_address       = var.kafka ? "${coalesce(var.kafka_host, aws_lb.kafka[0].dns_name)}:${local.kafka_port}" : null
  kafka_port_mappings = var.kafka ? [{ containerPort = local.kafka_port, protocol = "tcp" }] : []
  kafka_environment = var.kafka ? [
    { name = "STRATA_KAFKA_LISTEN", value = ":${local.kafka_port}" },
    { name = "STRATA_KAFKA_SHARED_ADDRESS", value = local.kafka_address },
    # The balancer drops a flow idle for 350s without telling either side (fixed for
    # TLS listeners); the node closes idle connections first, which clients notice.
    { name = "STRATA_KAFKA_IDLE_TIMEOUT", value = "5m" },
  ] : []
  # The balancer reaches the tasks on the Kafka port and, for its health check, the
  # HTTP port.
  kafka_task_ports   = var.kafka ? toset([local.kafka_port, local.port]) : toset([])
  kafka_client_cidrs = var.kafka ? toset(var.allowed_cidrs) : toset([])
}

resource "aws_security_group" "kafka" {
  count       = var.kafka ? 1 : 0
  name_prefix = "${var.name}-kafka-"
  description = "Strata Kafka load balancer"
  vpc_id      = var.vpc_id
  tags        = var.tags

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_ingress_rule" "kafka" {
  for_each          = local.kafka_client_cidrs
  security_group_id = aws_security_group.kafka[0].id
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = local.kafka_port
  to_port           = local.kafka_port
  description       = "Kafka clients"
}

resource "aws_vpc_security_group_egress_rule" "kafka_to_tasks" {
  for_each                     = local.kafka_task_ports
  security_group_id            = aws_security_group.kafka[0].id
  referenced_security_group_id = var.task_security_group_id
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  description                  = "To Strata tasks"
}

resource "aws_vpc_security_group_ingress_rule" "tasks_from_kafka" {
  for_each                     = local.kafka_task_ports
  security_group_id            = var.task_security_group_id
  referenced_security_group_id = aws_security_group.kafka[0].id
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  description                  = "From the Strata Kafka load balancer"
}

resource "aws_lb" "kafka" {
  count              = var.kafka ? 1 : 0
  name               = "${var.name}-kafka"
  load_balancer_type = "network"
  internal           = var.internal
  subnets            = var.public_subnet_ids
  security_groups    = [aws_security_group.kafka[0].id]
  # A client's connections to its brokers are spread over every node, not only those
  # in the client's AZ.
  enable_cross_zone_load_balancing = true
  tags                             = var.tags
}

resource "aws_lb_target_group" "kafka" {
  count                = var.kafka ? 1 : 0
  name                 = "${var.name}-kafka"
  port                 = local.kafka_port
  protocol             = "TCP"
  target_type          = "ip"
  vpc_id               = var.vpc_id
  deregistration_delay = 35
  # A stopping node has closed its connections by then; close what is left so clients
  # reconnect to another node at once.
  connection_termination = true
  tags                   = var.tags

  # Ready means the catalog and the bucket answer, not merely that 9092 accepts.
  health_check {
    protocol            = "HTTP"
    port                = tostring(local.port)
    path                = "/readyz"
    matcher             = "200"
    interval            = 10
    timeout             = 6
    healthy_threshold   = 2
    unhealthy_threshold = 3
  }
}

resource "aws_lb_listener" "kafka" {
  count             = var.kafka ? 1 : 0
  load_balancer_arn = aws_lb.kafka[0].arn
  port              = local.kafka_port
  protocol          = local.kafka_protocol
  certificate_arn   = local.kafka_protocol == "TLS" ? var.certificate_arn : null
  ssl_policy        = local.kafka_protocol == "TLS" ? "ELBSecurityPolicy-TLS13-1-2-2021-06" : null

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.kafka[0].arn
  }
}
